package operator

// The operator's permissions: `make generate` turns these markers into
// config/rbac/role.yaml (ClusterRole and, for its own namespace, Role
// kubectl-trainjob-operator). Keep them to what the code uses.

// TrainJobs and runtimes: read, patch the status, and take the legacy
// finalizer off runtimes. trainjobs/finalizers lets owner references with
// blockOwnerDeletion point at a TrainJob (OwnerReferencesPermissionEnforcement).
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainingruntimes;clustertrainingruntimes,verbs=get;list;watch;patch

// What the plugins build: JobSets (deleted past a TrainJob's deadline),
// PodGroups, and ConfigMaps and Secrets (runtime snapshots, MPI keys and
// hostfiles). The cache lists and watches only the ConfigMaps and Secrets
// the operator labelled.
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch;create;patch

// What gang-scheduling plugins watch to requeue suspended TrainJobs, and
// the PriorityClasses the Volcano plugin checks.
// +kubebuilder:rbac:groups="",resources=limitranges,verbs=get;list;watch
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch

// Events, through the events.k8s.io API (and the core one, for leader
// election's).
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// The status server (feature gate TrainJobStatus) has the API server review
// the trainers' tokens, and applies their reports to trainjobs/status.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// Certificate rotation: the CA is injected into the webhook configurations.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch;update

// In the operator's own namespace: the leader election Lease, and the
// webhook certificate Secret, which rotation rewrites with update.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=kubectl-trainjob-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=kubectl-trainjob-system,resources=secrets,verbs=get;list;watch;update
