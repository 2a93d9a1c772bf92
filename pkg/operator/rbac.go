package operator

// The operator's permissions: `make generate` turns these markers into
// config/rbac/role.yaml (ClusterRole and, for its own namespace, Role
// kubectl-trainjob-operator). Keep them to what the code uses: rbac_test.go
// names the code path of every rule, and the deploy test runs the operator
// with nothing else. Reads the controllers make from the cache need list and
// watch only; get is granted where something reads the API server directly.

// TrainJobs are read from the cache, and live before a child of a TrainJob
// built before is created again (is it being deleted?); the reconciler
// updates their status, the status server applies trainers' reports to it
// (a patch).
// trainjobs/finalizers lets owner references with blockOwnerDeletion point
// at a TrainJob (OwnerReferencesPermissionEnforcement).
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=patch;update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/finalizers,verbs=update

// OptimizationJobs (feature gate OptimizationJob) are read from the cache;
// the controller patches the count of trials it created into their
// annotations and updates their status. Their trials are TrainJobs it
// creates, and lists and reads live; optimizationjobs/finalizers lets the
// trials' owner references block their OptimizationJob's deletion.
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=optimizationjobs,verbs=list;watch;patch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=optimizationjobs/status,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=optimizationjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=create

// Runtimes: read from the cache, and live when a TrainJob names one the
// cache does not have yet; patched to take the legacy finalizer off.
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainingruntimes;clustertrainingruntimes,verbs=get;list;watch;patch

// What the plugins build: JobSets (deleted past a TrainJob's deadline),
// PodGroups, and ConfigMaps and Secrets (runtime snapshots, MPI keys and
// hostfiles). Each is created, then server-side applied; read from the
// cache, and live when the cache may be behind the operator's own writes.
// The cache lists and watches only the ConfigMaps and Secrets the operator
// labelled, but RBAC cannot grant by label: the MPI Secret is named after
// its TrainJob, in the TrainJob's namespace.
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch;create;patch

// DRA (KEP-2782): the pipeline counts the GPUs of a pod's claims from the
// ResourceClaimTemplates they name, read from the cache, and from the
// ResourceClaims they name, read live (liveKinds).
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaimtemplates,verbs=list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaims,verbs=get

// What gang-scheduling plugins watch to requeue suspended TrainJobs, and
// the PriorityClasses the Volcano plugin checks, all from the cache.
// +kubebuilder:rbac:groups="",resources=limitranges,verbs=list;watch
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=list;watch

// Events, through the events.k8s.io API (and the core one, for leader
// election's).
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// The API server reviews the bearer tokens of /metrics scrapers and of the
// trainers reporting to the status server (feature gate TrainJobStatus),
// and whether a scraper may get /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The status server follows the controller chain of the pod a reporting
// token is bound to (pod, Job, JobSet), read live: caching every pod and
// Job of the cluster is what the operator must not do.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get

// Certificate rotation: the CA is injected into the operator's own two
// webhook configurations, and no others (webhookscope.go lists and watches
// them by name).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch;update,resourceNames=validator.trainer.kubeflow.org;defaulter.trainer.kubeflow.org

// In the operator's own namespace: the leader election Lease, and the
// webhook certificate Secret, which rotation rewrites with update.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=kubectl-trainjob-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=kubectl-trainjob-system,resources=secrets,verbs=get;list;watch;update,resourceNames=kubectl-trainjob-webhook-cert
