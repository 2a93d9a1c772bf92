package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// jobSetNameLabel is on every pod of a JobSet; the JobSet pod webhooks only need to see those pods.
const jobSetNameLabel = "jobset.sigs.k8s.io/jobset-name"

var jobSetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

// startJobSet installs the JobSet webhook configurations, pointing at a local port with a fresh CA, and starts
// the JobSet controller serving them. It returns the controller's process and the webhook server's address.
func (c *Cluster) startJobSet(configDir string) (*process, string, error) {
	mutating, validating, err := jobSetWebhooks()
	if err != nil {
		return nil, "", err
	}
	// The port from FreePort, not envtest's pick from the ephemeral range: the controller binds it only once
	// started, and an outgoing connection of any process could have it by then.
	port, err := FreePort()
	if err != nil {
		return nil, "", err
	}
	c.webhooks = &envtest.WebhookInstallOptions{
		MutatingWebhooks:   mutating,
		ValidatingWebhooks: validating,
		LocalServingHost:   "127.0.0.1",
		LocalServingPort:   port,
	}
	// Generates the serving certificate and rewrites every service reference to https://127.0.0.1:<port>/path.
	if err := c.webhooks.PrepWithoutInstalling(); err != nil {
		return nil, "", fmt.Errorf("JobSet webhooks: %w", err)
	}
	if err := c.webhooks.Install(c.Config); err != nil {
		return nil, "", fmt.Errorf("install JobSet webhooks: %w", err)
	}

	configPath := filepath.Join(configDir, "jobset.yaml")
	config := fmt.Appendf(nil, `apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {host: 127.0.0.1, port: %d, certDir: %q}
metrics: {bindAddress: "0"}
health: {healthProbeBindAddress: "0"}
clientConnection: {qps: 500, burst: 500}
`, c.webhooks.LocalServingPort, c.webhooks.LocalServingCertDir)
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return nil, "", err
	}
	p, err := c.startProcess("jobset", filepath.Join(c.opts.ToolsDir, "jobset"),
		[]string{"--config=" + configPath}, []string{"KUBECONFIG=" + c.KubeconfigPath})
	if err != nil {
		return nil, "", err
	}
	return p, net.JoinHostPort("127.0.0.1", strconv.Itoa(c.webhooks.LocalServingPort)), nil
}

// jobSetWebhooks reads JobSet's webhook configurations and adapts them as upstream's kustomize overlay does:
// the generic kubebuilder names get a jobset- prefix (so they cannot collide with another project's), and the
// pod webhooks see only JobSet pods (the raw manifest would intercept every pod with failurePolicy Fail).
func jobSetWebhooks() ([]*admissionv1.MutatingWebhookConfiguration, []*admissionv1.ValidatingWebhookConfiguration, error) {
	data, err := manifests.ReadFile("manifests/jobset-webhooks.yaml")
	if err != nil {
		return nil, nil, err
	}
	mutating, validating, err := parseWebhooks(data, "JobSet")
	if err != nil {
		return nil, nil, err
	}
	onlyJobSetPods := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: jobSetNameLabel, Operator: metav1.LabelSelectorOpExists},
	}}
	isPodHook := func(rules []admissionv1.RuleWithOperations) bool {
		for _, r := range rules {
			if slices.Contains(r.Resources, "pods") {
				return true
			}
		}
		return false
	}
	for _, wc := range mutating {
		wc.Name = "jobset-" + wc.Name
		for i := range wc.Webhooks {
			if isPodHook(wc.Webhooks[i].Rules) {
				wc.Webhooks[i].ObjectSelector = onlyJobSetPods
			}
		}
	}
	for _, wc := range validating {
		wc.Name = "jobset-" + wc.Name
		for i := range wc.Webhooks {
			if isPodHook(wc.Webhooks[i].Rules) {
				wc.Webhooks[i].ObjectSelector = onlyJobSetPods
			}
		}
	}
	return mutating, validating, nil
}

// readWebhooks reads the webhook configurations of a project (what names it in errors) from the file at path.
func readWebhooks(path, what string) ([]*admissionv1.MutatingWebhookConfiguration, []*admissionv1.ValidatingWebhookConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s webhook configurations (run `make tools`): %w", what, err)
	}
	return parseWebhooks(data, what)
}

// parseWebhooks parses the mutating and validating webhook configurations of a multi-document manifest.
func parseWebhooks(data []byte, what string) ([]*admissionv1.MutatingWebhookConfiguration, []*admissionv1.ValidatingWebhookConfiguration, error) {
	var mutating []*admissionv1.MutatingWebhookConfiguration
	var validating []*admissionv1.ValidatingWebhookConfiguration
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
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
			wc := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, wc); err != nil {
				return nil, nil, err
			}
			mutating = append(mutating, wc)
		case "ValidatingWebhookConfiguration":
			wc := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, wc); err != nil {
				return nil, nil, err
			}
			validating = append(validating, wc)
		case "":
			// an empty document
		default:
			return nil, nil, fmt.Errorf("unexpected %s in the %s webhook manifests", meta.Kind, what)
		}
	}
	return mutating, validating, nil
}

// jobSetAdmitted reports whether a JobSet passes the JobSet webhooks, in a dry run. The webhook defaults the
// pods' restartPolicy, so the probe proves it ran; it also pays the one-off cost of the first JobSet request.
func (c *Cluster) jobSetAdmitted(ctx context.Context) (bool, error) {
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return false, err
	}
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2",
		"kind":       "JobSet",
		"metadata":   map[string]any{"name": "webhook-probe", "namespace": metav1.NamespaceDefault},
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "probe",
			"template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "probe", "image": "probe"}},
			}}}},
		}}},
	}}
	got, err := client.Resource(jobSetGVR).Namespace(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return false, err
	}
	jobs, _, _ := unstructured.NestedSlice(got.Object, "spec", "replicatedJobs")
	if len(jobs) == 1 {
		restart, _, _ := unstructured.NestedString(jobs[0].(map[string]any), "template", "spec", "template", "spec", "restartPolicy")
		if restart != "" {
			return true, nil
		}
	}
	return false, errors.New("the JobSet webhook did not default restartPolicy")
}

// startJobSetAlone starts the JobSet controller and its webhooks next to the api profile's API server, and
// waits until its webhooks admit a JobSet.
func (c *Cluster) startJobSetAlone(ctx context.Context) error {
	configDir := filepath.Join(c.Dir, "config")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return err
	}
	p, addr, err := c.startJobSet(configDir)
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, componentStartTimeout, "JobSet webhook server at "+addr, []*process{p},
		func(ctx context.Context) (bool, error) { return tlsServing(ctx, addr) }); err != nil {
		return err
	}
	return waitUntil(ctx, componentStartTimeout, "JobSet webhooks to admit a JobSet", []*process{p}, c.jobSetAdmitted)
}
