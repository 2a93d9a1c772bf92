// Package operator is the operator face of the binary (`kubectl-trainjob
// operator`): it wires a controller-runtime manager with the TrainJob and
// runtime controllers, the admission webhooks and their in-process
// certificates, leader election, probes and metrics, and, with the
// OptimizationJob feature gate, the OptimizationJob controller. The controllers and
// webhooks themselves live in subpackages; this package only assembles
// them. It must not hold reconcile logic.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/intern"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/controller"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/metrics"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/operator/webhook"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
)

// Options are what an Operator is built from.
type Options struct {
	// Config is the operator's configuration; it is defaulted and validated.
	Config *config.Configuration
	// RESTConfig reaches the API server; QPS and burst come from Config.
	RESTConfig *rest.Config
	// OutOfTree are the plugins a platform team's binary adds to the
	// in-tree ones (app.WithPlugin).
	OutOfTree pipeline.Registry
	// PprofBindAddress serves net/http/pprof there, for profiling; empty or "0" (the default) turns it off.
	PprofBindAddress string
}

// Operator is a configured controller manager, ready to start.
type Operator struct {
	mgr        manager.Manager
	cfg        *config.Configuration
	framework  *pipeline.Framework
	certsReady chan struct{}

	mu         sync.Mutex
	webhookErr error
}

// New builds an operator: its manager, caches, controllers, probes and,
// when enabled, its certificate rotation. Webhooks are registered once the
// certificates are ready, after Start.
func New(ctx context.Context, opts Options) (*Operator, error) {
	cfg := opts.Config
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	restConfig := rest.CopyConfig(opts.RESTConfig)
	restConfig.QPS = ptr.Deref(cfg.ClientConnection.QPS, config.DefaultQPS)
	restConfig.Burst = int(ptr.Deref(cfg.ClientConnection.Burst, config.DefaultBurst))

	webhooksOn := ptr.Deref(cfg.Webhook.Enable, true)
	// The cache starts with the manager, once the framework exists.
	trim := &trimmer{snapshots: &snapshot.SharedContents{}}
	mgr, err := manager.New(restConfig, managerOptions(cfg, opts.PprofBindAddress, trim.trimForCache))
	if err != nil {
		return nil, fmt.Errorf("controller manager: %w", err)
	}

	reader := &liveOnMiss{Client: mgr.GetClient(), live: mgr.GetAPIReader()}
	ca := newServingCA()
	fw, err := plugins.NewFramework(ctx, plugins.Config{Features: cfg.Features(), OutOfTree: opts.OutOfTree, Plugins: cfg.Plugins},
		pipeline.NewOperatorHandle(reader, mgr.GetRESTMapper(), cfg.OperatorInfo(), ca))
	if err != nil {
		return nil, fmt.Errorf("pipeline framework: %w", err)
	}
	trim.framework = fw
	o := &Operator{mgr: mgr, cfg: cfg, framework: fw, certsReady: make(chan struct{})}
	if webhooksOn {
		o.webhookErr = errors.New("webhooks are not registered yet")
	}

	if err := controller.NewTrainJobReconciler(mgr, fw).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("TrainJob controller: %w", err)
	}
	if err := controller.SetupRuntimeControllers(mgr); err != nil {
		return nil, fmt.Errorf("runtime controllers: %w", err)
	}
	if cfg.Enabled(config.FeatureOptimizationJob) {
		if err := controller.NewOptimizationJobReconciler(mgr).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("OptimizationJob controller: %w", err)
		}
	}

	if webhooksOn && ptr.Deref(cfg.CertManagement.Enable, true) {
		if err := addCertRotation(mgr, cfg, o.certsReady, ca); err != nil {
			return nil, err
		}
	} else {
		// No webhooks, or their certificates come from elsewhere
		// (cert-manager): the status server's clients trust the Secret's CA.
		close(o.certsReady)
		if cfg.Enabled(config.FeatureTrainJobStatus) {
			if err := addSecretCA(mgr, cfg, ca); err != nil {
				return nil, err
			}
		}
	}

	metrics.Register()
	// The trainjobs gauge counts what the leader's cache holds.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return metrics.ServeTrainJobs(ctx, mgr.GetCache())
	})); err != nil {
		return nil, err
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhooks", o.webhooksReady); err != nil {
		return nil, err
	}
	if err := setupFeatures(mgr, cfg); err != nil {
		return nil, err
	}
	return o, nil
}

// managerOptions are the controller manager's options: its cache (scoped by
// cacheOptions, transform on the way in), metrics, probes, leader election,
// webhook server and controllers, all from cfg.
func managerOptions(cfg *config.Configuration, pprofBindAddress string, transform toolscache.TransformFunc) manager.Options {
	le := cfg.LeaderElection
	return manager.Options{
		Scheme: scheme.New(),
		Cache:  cacheOptions(cfg, transform),
		Metrics: metricsserver.Options{
			BindAddress:   cfg.Metrics.BindAddress,
			SecureServing: ptr.Deref(cfg.Metrics.SecureServing, true),
			// Only who the API server says may get /metrics reads it
			// (ClusterRole kubectl-trainjob-metrics-reader): a bearer token,
			// reviewed with a TokenReview and a SubjectAccessReview.
			FilterProvider: filters.WithAuthenticationAndAuthorization,
			// Served uncompressed: the gzip writers promhttp pools between
			// scrapes stay in the heap for the operator's whole life, to
			// spare a scraper, usually next to it in the cluster, a little
			// network.
			HandlerOpts: []func(*promhttp.HandlerOpts){func(o *promhttp.HandlerOpts) { o.DisableCompression = true }},
		},
		PprofBindAddress:              pprofBindAddress,
		HealthProbeBindAddress:        cfg.Health.HealthProbeBindAddress,
		ReadinessEndpointName:         "/" + cfg.Health.ReadinessEndpointName,
		LivenessEndpointName:          "/" + cfg.Health.LivenessEndpointName,
		LeaderElection:                ptr.Deref(le.LeaderElect, true),
		LeaderElectionResourceLock:    le.ResourceLock,
		LeaderElectionID:              le.ResourceName,
		LeaderElectionNamespace:       le.ResourceNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration.Duration,
		RenewDeadline:                 &le.RenewDeadline.Duration,
		RetryPeriod:                   &le.RetryPeriod.Duration,
		WebhookServer: crwebhook.NewServer(crwebhook.Options{
			Host:    cfg.Webhook.Host,
			Port:    int(ptr.Deref(cfg.Webhook.Port, config.DefaultWebhookPort)),
			CertDir: cfg.Webhook.CertDir,
		}),
		Controller: crconfig.Controller{
			GroupKindConcurrency: cfg.Controller.GroupKindConcurrency,
			// Names are fixed, and each manager registers each controller
			// once; the process-wide uniqueness check would only forbid
			// running two operators in one process, as tests do.
			SkipNameValidation: ptr.To(true),
			// A replica that does not lead fills its caches all the same,
			// so that when the leader dies the next one reconciles as soon
			// as it takes the Lease, not after listing every TrainJob and
			// child first.
			EnableWarmup: ptr.To(ptr.Deref(cfg.Controller.Warmup, true)),
		},
	}
}

// cacheOptions scope the cache to what the operator owns: ConfigMaps and
// Secrets only when they carry the TrainJob name label the operator sets on
// the ones it applies, everything only in the watched namespace if one is
// set; and what nobody reads is dropped (transform: trimmer.trimForCache).
func cacheOptions(cfg *config.Configuration, transform toolscache.TransformFunc) cache.Options {
	owned, _ := labels.NewRequirement(pipeline.TrainJobNameLabel, selection.Exists, nil)
	selector := labels.NewSelector().Add(*owned)
	opts := cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: selector},
			&corev1.Secret{}:    {Label: selector},
		},
		DefaultTransform: transform,
	}
	if ns := cfg.Controller.WatchNamespace; ns != "" {
		opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	}
	return opts
}

// trimmer is the transform of what the cache keeps.
type trimmer struct {
	snapshots *snapshot.SharedContents
	// framework's plugins trim what they read (pipeline.CacheTrimPlugin).
	framework *pipeline.Framework
}

// trimForCache drops from every cached object what no reader of the
// operator reads and what can be as large as the rest of the object: its
// managed fields, and kubectl's last-applied-configuration annotation (a
// copy of the object as kubectl last applied it); and what the plugins
// never read there (JobSets' pod templates). Runtime snapshots of the same
// content share it.
func (t *trimmer) trimForCache(in any) (any, error) {
	if standIn := standInForForeign(in); standIn != nil {
		return standIn, nil
	}
	if cm, ok := in.(*corev1.ConfigMap); ok {
		t.snapshots.Share(cm)
	}
	if obj, ok := in.(client.Object); ok {
		t.framework.TrimForCache(obj)
	}
	obj, err := meta.Accessor(in)
	if err != nil {
		// A tombstone: nothing to trim.
		return in, nil
	}
	if obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	if annotations := obj.GetAnnotations(); annotations[corev1.LastAppliedConfigAnnotation] != "" {
		delete(annotations, corev1.LastAppliedConfigAnnotation)
	}
	intern.ObjectMeta(obj)
	if tj, ok := in.(*trainer.TrainJob); ok {
		internTrainJob(tj)
	}
	return in, nil
}

// standInForForeign is what the cache keeps of a ConfigMap or Secret that
// carries the TrainJob name label but that no TrainJob controls: anyone
// who may write ConfigMaps in a namespace can set the label, and the cache
// would hold each such object whole, a megabyte each, on every replica,
// until the operator ran out of memory and the webhooks with it. The
// stand-in keeps what tells the readers that the object exists and is
// not theirs (its name, UID, resourceVersion, controller) and nothing
// its writer chose the size of. It is nil for every other object, which
// the cache keeps as trimmed below. (An informer cannot leave an object
// out: its transform returns one for every object listed or watched.)
func standInForForeign(in any) client.Object {
	var obj, standIn client.Object
	switch in := in.(type) {
	case *corev1.ConfigMap:
		obj, standIn = in, &corev1.ConfigMap{TypeMeta: in.TypeMeta}
	case *corev1.Secret:
		obj, standIn = in, &corev1.Secret{TypeMeta: in.TypeMeta}
	default:
		return nil
	}
	if pipeline.TrainJobController(obj) != nil {
		return nil
	}
	standIn.SetNamespace(obj.GetNamespace())
	standIn.SetName(obj.GetName())
	standIn.SetUID(obj.GetUID())
	standIn.SetResourceVersion(obj.GetResourceVersion())
	standIn.SetCreationTimestamp(obj.GetCreationTimestamp())
	standIn.SetDeletionTimestamp(obj.GetDeletionTimestamp())
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		standIn.SetOwnerReferences([]metav1.OwnerReference{*ref})
	}
	if name, ok := obj.GetLabels()[pipeline.TrainJobNameLabel]; ok {
		standIn.SetLabels(map[string]string{pipeline.TrainJobNameLabel: name})
	}
	intern.ObjectMeta(standIn)
	return standIn
}

// internTrainJob interns the strings a TrainJob shares with the other
// TrainJobs of its runtime (see package intern).
func internTrainJob(tj *trainer.TrainJob) {
	ref := &tj.Spec.RuntimeRef
	ref.Name = intern.String(ref.Name)
	intern.Pointer(ref.APIGroup)
	intern.Pointer(ref.Kind)
	intern.Pointer(tj.Spec.ManagedBy)
	intern.Conditions(tj.Status.Conditions)
	for i := range tj.Status.JobsStatus {
		tj.Status.JobsStatus[i].Name = intern.String(tj.Status.JobsStatus[i].Name)
	}
}

// webhooksReady is the readiness check: ready once the certificates exist
// and the webhook server serves them (or when webhooks are off).
func (o *Operator) webhooksReady(req *http.Request) error {
	select {
	case <-o.certsReady:
	default:
		return errors.New("webhook certificates are not ready")
	}
	if !ptr.Deref(o.cfg.Webhook.Enable, true) {
		return nil
	}
	o.mu.Lock()
	err := o.webhookErr
	o.mu.Unlock()
	if err != nil {
		return err
	}
	return o.mgr.GetWebhookServer().StartedChecker()(req)
}

// Start runs the operator until ctx ends or it fails; with leader election,
// the process must exit when it returns.
func (o *Operator) Start(ctx context.Context) error {
	if ptr.Deref(o.cfg.Webhook.Enable, true) {
		go o.setupWebhooks(ctx)
	}
	return o.mgr.Start(ctx)
}

// setupWebhooks registers the webhooks, which starts their server, once the
// certificates it serves are ready.
func (o *Operator) setupWebhooks(ctx context.Context) {
	select {
	case <-o.certsReady:
	case <-ctx.Done():
		return
	}
	err := webhook.Setup(o.mgr, o.framework)
	if err != nil {
		log.FromContext(ctx).Error(err, "Registering the webhooks")
		err = fmt.Errorf("webhooks: %w", err)
	}
	o.mu.Lock()
	o.webhookErr = err
	o.mu.Unlock()
}

// Manager is the operator's controller manager.
func (o *Operator) Manager() manager.Manager { return o.mgr }
