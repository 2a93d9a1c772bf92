// Package trainjobstatus is the TrainJobStatus plugin of KEP-2779 (feature
// gate TrainJobStatus): it tells every trainer container where the
// operator's status server is and gives it what it needs to report there —
// a ServiceAccount token for the TrainJob's own audience and the CA of the
// server's certificate, which it copies into a ConfigMap next to the
// TrainJob. The in-tree registry holds it only when the gate is on. The CA
// comes from the Handle's ServingCA: in the operator, the bundle its
// certificate management keeps in memory (no build reads the Secret, and a
// change of the CA rebuilds every TrainJob, so that it reaches running
// trainers); offline (render), the webhook certificate Secret given with
// the input files.
package trainjobstatus

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Name is the plugin's name in the registry.
const Name = "TrainJobStatus"

// What the trainer containers get, as upstream names it.
const (
	EnvServerURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvServerCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvServerToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"

	// TLSConfigMapSuffix names the ConfigMap <job>-tls-config that holds
	// the status server's CA.
	TLSConfigMapSuffix = "-tls-config"
	// CACertKey is the CA's key in the webhook certificate Secret and in
	// the ConfigMap, and its file name in the pod.
	CACertKey = pipeline.ServingCAKey

	TokenVolume        = "kubeflow-trainer-token"
	MountPath          = "/var/run/secrets/kubeflow/trainer"
	tokenFile          = "token"
	tokenExpirySeconds = 3600
)

// StatusPath is the status server's path of a TrainJob's status.
func StatusPath(namespace, name string) string {
	return "/apis/" + trainer.GroupVersion.String() + "/namespaces/" + namespace + "/trainjobs/" + name + "/status"
}

// TokenAudience is the audience of the tokens the status server accepts
// for a TrainJob: a token of one TrainJob cannot report for another.
func TokenAudience(namespace, name string) string {
	return trainer.GroupVersion.String() + "/namespaces/" + namespace + "/trainjobs/" + name + "/status"
}

// TrainJobStatus wires trainer pods to the status server.
type TrainJobStatus struct {
	ca       pipeline.ServingCA
	operator pipeline.OperatorInfo
}

var (
	_ pipeline.EnforcePodSpecPlugin   = (*TrainJobStatus)(nil)
	_ pipeline.ComponentBuilderPlugin = (*TrainJobStatus)(nil)
	_ pipeline.WatchExtensionPlugin   = (*TrainJobStatus)(nil)
)

// New builds the plugin from the operator's facts in h.
func New(_ context.Context, h pipeline.Handle) (pipeline.Plugin, error) {
	op := h.Operator()
	if op.Namespace == "" || op.WebhookServiceName == "" || op.WebhookSecretName == "" || op.StatusServerPort <= 0 {
		return nil, fmt.Errorf("needs the operator's namespace, webhook Service name, webhook Secret name and status server port; got %+v", op)
	}
	return &TrainJobStatus{ca: h.ServingCA(), operator: op}, nil
}

// Name returns the plugin's name.
func (p *TrainJobStatus) Name() string { return Name }

// EnforcePodSpec gives every container of the trainer step the status
// server's URL, and mounts the token and the CA the variables point to.
func (p *TrainJobStatus) EnforcePodSpec(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	ps := info.TrainerPodSet()
	if ps == nil || ps.Template == nil {
		return nil
	}
	url := fmt.Sprintf("https://%s.%s.svc:%d%s", p.operator.WebhookServiceName, p.operator.Namespace,
		p.operator.StatusServerPort, StatusPath(trainJob.Namespace, trainJob.Name))
	for k := range ps.Template.Spec.Containers {
		c := &ps.Template.Spec.Containers[k]
		pipeline.UpsertEnv(c,
			corev1.EnvVar{Name: EnvServerURL, Value: url},
			corev1.EnvVar{Name: EnvServerCACert, Value: MountPath + "/" + CACertKey},
			corev1.EnvVar{Name: EnvServerToken, Value: MountPath + "/" + tokenFile},
		)
		pipeline.UpsertVolumeMount(c, corev1.VolumeMount{Name: TokenVolume, MountPath: MountPath, ReadOnly: true})
	}
	ps.UpsertVolume(corev1.Volume{
		Name: TokenVolume,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience:          TokenAudience(trainJob.Namespace, trainJob.Name),
				ExpirationSeconds: ptr.To[int64](tokenExpirySeconds),
				Path:              tokenFile,
			}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: trainJob.Name + TLSConfigMapSuffix},
				Items:                []corev1.KeyToPath{{Key: CACertKey, Path: CACertKey}},
			}},
		}}},
	})
	return nil
}

// Build returns the ConfigMap with the status server's CA bundle. A
// TrainJob without a trainer step mounts nothing and gets no ConfigMap.
func (p *TrainJobStatus) Build(ctx context.Context, info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) ([]client.Object, error) {
	if info.TrainerPodSet() == nil {
		return nil, nil
	}
	ca, err := p.ca.Bundle(ctx)
	if err != nil {
		return nil, fmt.Errorf("the status server's CA: %w", err)
	}
	return []client.Object{&corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            trainJob.Name + TLSConfigMapSuffix,
			Namespace:       trainJob.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(trainJob, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
		},
		Data: map[string]string{CACertKey: string(ca)},
	}}, nil
}

// ReconcilerBuilders makes a change of the CA wake the TrainJob controller
// for every TrainJob, so that the -tls-config ConfigMaps of running
// TrainJobs follow a rotated CA (the kubelet then updates the trainers'
// projected volume).
func (p *TrainJobStatus) ReconcilerBuilders() []pipeline.ReconcilerBuilder {
	return []pipeline.ReconcilerBuilder{func(b *builder.Builder, _ client.Client, c cache.Cache) *builder.Builder {
		return b.WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			p.ca.Notify(func() {
				var list trainer.TrainJobList
				if err := c.List(ctx, &list); err != nil {
					log.FromContext(ctx).Error(err, "Listing the TrainJobs to give them the new CA of the status server")
					return
				}
				for i := range list.Items {
					q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				}
			})
			return nil
		}))
	}}
}
