package optest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/webhook"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// WebhookConfigurations reads config/webhook/manifests.yaml.
func WebhookConfigurations() (*admissionv1.MutatingWebhookConfiguration, *admissionv1.ValidatingWebhookConfiguration, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, nil, err
	}
	var mutating *admissionv1.MutatingWebhookConfiguration
	var validating *admissionv1.ValidatingWebhookConfiguration
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			mutating = &admissionv1.MutatingWebhookConfiguration{}
			err = yaml.UnmarshalStrict(doc, mutating)
		case "ValidatingWebhookConfiguration":
			validating = &admissionv1.ValidatingWebhookConfiguration{}
			err = yaml.UnmarshalStrict(doc, validating)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if mutating == nil || validating == nil {
		return nil, nil, errors.New("config/webhook/manifests.yaml lacks a webhook configuration")
	}
	return mutating, validating, nil
}

// ByURL points a webhook client configuration at the webhook server on
// localhost instead of the Service (which nothing serves here). The CA is
// left to the operator to inject.
func ByURL(cc *admissionv1.WebhookClientConfig, port int32) {
	path := ptr.Deref(cc.Service.Path, "/")
	cc.URL = ptr.To("https://localhost:" + strconv.Itoa(int(port)) + path)
	cc.Service = nil
}

// InstallWebhooks creates, as the administrator, the operator's namespace,
// its empty certificate Secret and the webhook configurations of
// config/webhook, reaching the webhook server on port by URL.
func InstallWebhooks(ctx context.Context, c client.Client, port int32) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "kubectl-trainjob-webhook-cert"}}
	if err := c.Create(ctx, secret); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	mutating, validating, err := WebhookConfigurations()
	if err != nil {
		return err
	}
	for k := range mutating.Webhooks {
		ByURL(&mutating.Webhooks[k].ClientConfig, port)
	}
	for k := range validating.Webhooks {
		ByURL(&validating.Webhooks[k].ClientConfig, port)
	}
	for _, obj := range []client.Object{mutating, validating} {
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// WebhooksServed is nil once the API server calls the operator's
// validating webhook: a dry-run TrainJob naming a missing runtime is denied
// by it.
func WebhooksServed(ctx context.Context, c client.Client) error {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "webhook-probe"},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "no-such-runtime"}},
	}
	err := c.Create(ctx, tj, client.DryRunAll)
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), webhook.TrainJobValidatorName) {
		return nil
	}
	return fmt.Errorf("the TrainJob validating webhook is not served yet: %v", err)
}

// Ready is nil once the operator's readiness probe succeeds.
func (o *Operator) Ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.ProbeURL("readyz"), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: readyz %d: %s", ErrNotReady, resp.StatusCode, body)
	}
	return nil
}

// Scrape reads /metrics (served over TLS with a self-signed certificate).
func (o *Operator) Scrape(ctx context.Context) (string, error) {
	body, _, err := o.scrape(ctx, "")
	return body, err
}

// MetricsEncoding is the Content-Encoding of /metrics for a client that accepts acceptEncoding.
func (o *Operator) MetricsEncoding(ctx context.Context, acceptEncoding string) (string, error) {
	_, encoding, err := o.scrape(ctx, acceptEncoding)
	return encoding, err
}

func (o *Operator) scrape(ctx context.Context, acceptEncoding string) (body, encoding string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.MetricsURL(), nil)
	if err != nil {
		return "", "", err
	}
	// Only who may get /metrics reads it (ClusterRole kubectl-trainjob-metrics-reader).
	req.Header.Set("Authorization", "Bearer "+metricsToken)
	if acceptEncoding != "" {
		// Set by hand, the transport leaves the response as the server encoded it.
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed metrics certificate
	resp, err := hc.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("metrics: %d: %s", resp.StatusCode, data)
	}
	return string(data), resp.Header.Get("Content-Encoding"), nil
}

// BreakCA takes the CA's key out of the webhook certificate Secret of key:
// a CA that cannot sign, which the operator replaces with a new one.
func BreakCA(ctx context.Context, c client.Client, key client.ObjectKey) error {
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		return err
	}
	delete(s.Data, "ca.key")
	return c.Update(ctx, s)
}
