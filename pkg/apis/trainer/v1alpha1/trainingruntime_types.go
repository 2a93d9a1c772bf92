package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:storageversion

// ClusterTrainingRuntime is a cluster-wide template of TrainJobs.
type ClusterTrainingRuntime struct {
	metav1.TypeMeta `json:",inline"`

	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec of the runtime.
	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitzero"`
}

// +kubebuilder:object:root=true

// ClusterTrainingRuntimeList is a list of ClusterTrainingRuntimes.
type ClusterTrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterTrainingRuntime `json:"items"`
}

// +kubebuilder:object:root=true
// +kubebuilder:storageversion

// TrainingRuntime is a namespaced template of TrainJobs.
type TrainingRuntime struct {
	metav1.TypeMeta `json:",inline"`

	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec of the runtime.
	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitzero"`
}

// +kubebuilder:object:root=true

// TrainingRuntimeList is a list of TrainingRuntimes.
type TrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingRuntime `json:"items"`
}

// TrainingRuntimeSpec is the template of a TrainJob: its ML policy, its
// gang-scheduling policy and the JobSet it runs as.
// +kubebuilder:validation:MinProperties=1
type TrainingRuntimeSpec struct {
	// mlPolicy configures the ML framework.
	// +optional
	MLPolicy *MLPolicy `json:"mlPolicy,omitempty"`

	// podGroupPolicy configures gang scheduling.
	// +optional
	PodGroupPolicy *PodGroupPolicy `json:"podGroupPolicy,omitempty"`

	// template is the JobSet template.
	// +required
	Template JobSetTemplateSpec `json:"template,omitzero"`
}

// JobSetTemplateSpec is a JobSet template.
// +kubebuilder:validation:MinProperties=1
type JobSetTemplateSpec struct {
	// metadata: labels and annotations of the JobSet.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec of the JobSet.
	// +optional
	Spec jobsetv1alpha2.JobSetSpec `json:"spec,omitzero"`
}

// PodGroupPolicy configures gang scheduling of a TrainJob's Pods.
type PodGroupPolicy struct {
	PodGroupPolicySource `json:",inline"`
}

// PodGroupPolicySource is the gang-scheduling plugin to use; set at most one.
type PodGroupPolicySource struct {
	// coscheduling uses the scheduler-plugins coscheduling plugin.
	// +optional
	Coscheduling *CoschedulingPodGroupPolicySource `json:"coscheduling,omitempty"`

	// volcano uses the Volcano scheduler.
	// +optional
	Volcano *VolcanoPodGroupPolicySource `json:"volcano,omitempty"`
}

// CoschedulingPodGroupPolicySource configures the coscheduling plugin.
type CoschedulingPodGroupPolicySource struct {
	// scheduleTimeoutSeconds is how long the PodGroup may wait to be scheduled.
	// +kubebuilder:default=60
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// VolcanoPodGroupPolicySource configures Volcano gang scheduling.
type VolcanoPodGroupPolicySource struct {
	// networkTopology constrains the Pods to a network topology.
	// +optional
	NetworkTopology *volcanov1beta1.NetworkTopologySpec `json:"networkTopology,omitempty"`
}

// MLPolicy is the ML framework of a runtime; no source means PlainML.
// +kubebuilder:validation:XValidation:rule="[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost), has(self.flux)].filter(x, x).size() <= 1", message="Only one of the policy can be configured"
type MLPolicy struct {
	// numNodes is the default number of training nodes.
	// +optional
	NumNodes *int32 `json:"numNodes,omitempty"`

	MLPolicySource `json:",inline"`
}

// MLPolicySource is the ML framework; set at most one.
type MLPolicySource struct {
	// torch configures PyTorch distributed training.
	// +optional
	Torch *TorchMLPolicySource `json:"torch,omitempty"`

	// mpi configures MPI training.
	// +optional
	MPI *MPIMLPolicySource `json:"mpi,omitempty"`

	// flux configures the Flux framework.
	// +optional
	Flux *FluxMLPolicySource `json:"flux,omitempty"`

	// jax configures JAX distributed training.
	// +optional
	JAX *JAXMLPolicySource `json:"jax,omitempty"`

	// xgboost configures XGBoost distributed training.
	// +optional
	XGBoost *XGBoostMLPolicySource `json:"xgboost,omitempty"`
}

// TorchMLPolicySource configures PyTorch.
type TorchMLPolicySource struct {
	// envInjection injects the PET_* environment into more containers.
	// +optional
	EnvInjection *EnvInjection `json:"envInjection,omitempty"`
}

// EnvInjection lists containers that get the torch environment.
type EnvInjection struct {
	// targets are the containers to inject into.
	// +listType=map
	// +listMapKey=jobName
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Targets []EnvInjectionTarget `json:"targets,omitempty"`
}

// EnvInjectionTarget names containers of one replicated job.
type EnvInjectionTarget struct {
	// jobName is the replicated job.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	JobName string `json:"jobName,omitempty"`

	// containerNames are containers (or init containers) of that job.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!self.exists(c, c == 'node')", message="containerNames must not contain node"
	// +required
	ContainerNames []string `json:"containerNames,omitempty"`
}

// MPIImplementation is an MPI implementation.
// +kubebuilder:validation:Enum=OpenMPI;""
type MPIImplementation string

// MPI implementations; only OpenMPI is supported.
const (
	MPIImplementationOpenMPI MPIImplementation = "OpenMPI"
	MPIImplementationIntel   MPIImplementation = "Intel"
	MPIImplementationMPICH   MPIImplementation = "MPICH"
)

// MPIMLPolicySource configures MPI.
type MPIMLPolicySource struct {
	// numProcPerNode is the number of slots per node.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 1", message="NumProcPerNode in mpiPolicy must be >= 1"
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`

	// mpiImplementation is the MPI implementation.
	// +kubebuilder:default="OpenMPI"
	// +optional
	MPIImplementation *MPIImplementation `json:"mpiImplementation,omitempty"`

	// sshAuthMountPath is where the SSH keys are mounted.
	// +kubebuilder:default="/root/.ssh"
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	SSHAuthMountPath *string `json:"sshAuthMountPath,omitempty"`

	// runLauncherAsNode makes the launcher also a training node.
	// +kubebuilder:default=false
	// +optional
	RunLauncherAsNode *bool `json:"runLauncherAsNode,omitempty"`
}

// FluxMLPolicySource configures the Flux framework.
type FluxMLPolicySource struct {
	// numProcPerNode is the number of tasks per node.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 1", message="NumProcPerNode in fluxPolicy must be >= 1"
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}

// JAXMLPolicySource configures JAX.
type JAXMLPolicySource struct{}

// XGBoostMLPolicySource configures XGBoost.
type XGBoostMLPolicySource struct{}
