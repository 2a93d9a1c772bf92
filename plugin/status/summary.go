package status

import (
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/failure"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/gpuhealth"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// SummaryAPIVersion and SummaryKind identify the document `status -o json|yaml` prints, so tools can tell
// which shape they parse.
const (
	SummaryAPIVersion = "kubectl-trainjob.trainer.kubeflow.org/v1alpha1"
	SummaryKind       = "TrainJobStatusSummary"
)

// Summary is everything `status` shows about one TrainJob: what the screen renders and what -o json|yaml
// prints. It is derived only from upstream fields, conditions, Events and the JobSet's labels.
type Summary struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	// Runtime is Kind/name of the runtime the TrainJob references.
	Runtime string      `json:"runtime"`
	Created metav1.Time `json:"created"`
	// Stage is where the TrainJob is (pkg/stage); Reason says why it is there, or what it waits for.
	Stage  stage.Stage `json:"stage"`
	Reason string      `json:"reason,omitempty"`
	// BlockedByTaint is set when the TrainJob's unschedulable pods are kept off the nodes only by taints they
	// do not tolerate; Reason then says so, and BlockedByTaint.WayOut how to tolerate them.
	BlockedByTaint *TaintBlock `json:"blockedByTaint,omitempty"`
	// FirstFailure is the first failure of the TrainJob's containers, by when it happened (plugin/failure), with
	// the end of its log: why a Failed TrainJob failed, or what keeps failing in one that has not ended. Unset
	// for a Complete TrainJob.
	FirstFailure *failure.Failure `json:"firstFailure,omitempty"`
	// Progress is the trainer's own report (status.trainerStatus), when it sends one.
	Progress *Progress `json:"progress,omitempty"`
	// Queue is what Kueue says of a TrainJob in one of its LocalQueues (label kueue.x-k8s.io/queue-name).
	Queue *Queue `json:"queue,omitempty"`
	// Worker is the worker cluster a TrainJob that MultiKueue dispatched runs on (multikueue.go).
	Worker *Worker `json:"worker,omitempty"`
	// Stages is the pipeline: Pending, Initializing (when the runtime has initializers), Training, and the
	// terminal stage once reached, each with when it started and ended.
	Stages     []StageSpan        `json:"stages"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Timeline is every transition known: creation, the conditions and the TrainJob's Events, and for a
	// TrainJob queued by Kueue its Workload's conditions and Events, oldest first.
	Timeline []TimelineEntry `json:"timeline"`
	// Jobs are the replicated jobs of the JobSet (status.jobsStatus counts Jobs, not pods).
	Jobs []JobSummary `json:"jobs"`
	Pods []PodSummary `json:"pods"`
	// Warnings are the most recent Warning Events of the TrainJob, its JobSet, Jobs and pods, newest first.
	Warnings []Warning `json:"warnings,omitempty"`

	// recorded is the newest time the cluster recorded about the TrainJob and its children (lastRecorded).
	recorded metav1.Time
}

// Progress is status.trainerStatus.
type Progress struct {
	Percentage       *int32           `json:"percentage,omitempty"`
	RemainingSeconds *int32           `json:"remainingSeconds,omitempty"`
	Metrics          []trainer.Metric `json:"metrics,omitempty"`
	LastUpdated      metav1.Time      `json:"lastUpdated"`
}

// StageSpan is one stage of the pipeline. Start is unset while the stage has not begun, End while it runs.
// Duration is End-Start, or now-Start while the stage runs, as a Go duration ("1m30s"); it is empty when
// not known (Pending's end when the Jobs that ended it cannot be read).
type StageSpan struct {
	Name     stage.Stage  `json:"name"`
	Start    *metav1.Time `json:"start,omitempty"`
	End      *metav1.Time `json:"end,omitempty"`
	Duration string       `json:"duration,omitempty"`
}

// Timeline entry sources.
const (
	SourceCreated           = "Created"
	SourceCondition         = "Condition"
	SourceEvent             = "Event"
	SourceWorkloadCondition = "WorkloadCondition"
	SourceWorkloadEvent     = "WorkloadEvent"
)

// Queue is what Kueue says of a TrainJob in one of its LocalQueues, from the TrainJob's Workload.
type Queue struct {
	LocalQueue string `json:"localQueue"`
	// ClusterQueue is the one that admitted the Workload, else the LocalQueue's.
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// Workload names the TrainJob's Kueue Workload; empty while Kueue has not made it (Note then says so).
	Workload      string `json:"workload,omitempty"`
	Priority      *int32 `json:"priority,omitempty"`
	PriorityClass string `json:"priorityClass,omitempty"`
	// Active is the Workload's spec.active: false once stopped (suspend), and Kueue then does not admit it.
	Active   bool `json:"active"`
	Admitted bool `json:"admitted"`
	// AdmittedAt is when Kueue admitted the Workload, while it is admitted.
	AdmittedAt *metav1.Time `json:"admittedAt,omitempty"`
	// NotAdmitted is why Kueue has not admitted the Workload, as Kueue wrote it in its QuotaReserved (or
	// Admitted) condition.
	NotAdmitted string `json:"notAdmitted,omitempty"`
	// Position is where the pending Workload is in its queues, as the screen says it: "pending" when Kueue's
	// visibility API is not served (or the Workload is not in its list); empty unless the TrainJob is Queued.
	// PositionInClusterQueue and PositionInLocalQueue are the visibility API's numbers (0 is next).
	Position               string `json:"position,omitempty"`
	PositionInClusterQueue *int32 `json:"positionInClusterQueue,omitempty"`
	PositionInLocalQueue   *int32 `json:"positionInLocalQueue,omitempty"`
	// Evictions are the times Kueue evicted the Workload (preempted it, or stopped it), oldest first.
	Evictions []Eviction `json:"evictions,omitempty"`
	// Topology is what the pod sets that asked Kueue's topology-aware scheduling for one domain asked, and
	// the domains Kueue assigned them once admitted.
	Topology []PodSetTopology `json:"topology,omitempty"`
	// Note says what could not be known: Kueue not installed, Workloads the user may not read, no Workload yet.
	Note string `json:"note,omitempty"`
}

// PodSetTopology is what a pod set asked of Kueue's topology-aware scheduling (TAS) and where Kueue put it.
type PodSetTopology struct {
	PodSet string `json:"podSet"`
	// Level is the node label of the level within one domain of which the pod set asked to run; Required is
	// false when it is only preferred.
	Level    string `json:"level"`
	Required bool   `json:"required"`
	// Domains are where Kueue put the pods, by the domains of Level when the nodes could be read, else by node.
	Domains []TopologyDomain `json:"domains,omitempty"`
}

// TopologyDomain is one domain of a topology assignment: its value at the level asked for ("rack-1"; empty
// when the nodes could not be read), its nodes and how many pods it runs.
type TopologyDomain struct {
	Value string   `json:"value,omitempty"`
	Nodes []string `json:"nodes"`
	Pods  int32    `json:"pods"`
}

// Eviction is one time Kueue evicted the Workload: its Event (EvictedDueTo<Reason>), or its Evicted condition.
type Eviction struct {
	Time metav1.Time `json:"time"`
	// Reason is the Evicted condition's reason: Preempted, Deactivated, PodsReadyTimeout, ...
	Reason string `json:"reason"`
	// By names what preempted the Workload (Kind/name of the preempting Workload's owner, "TrainJob/urgent"),
	// when it is in the same namespace.
	By      string `json:"by,omitempty"`
	Message string `json:"message,omitempty"`
	Count   int32  `json:"count,omitempty"`
}

// PositionPending is Queue.Position when Kueue does not tell the position.
const PositionPending = kueue.PositionPending

// TimelineEntry is one transition of the TrainJob.
type TimelineEntry struct {
	Time metav1.Time `json:"time"`
	// Since is the time from the TrainJob's creation, as a Go duration.
	Since  string `json:"since"`
	Source string `json:"source"`
	// Type is the condition's type or the Event's type (Normal, Warning).
	Type    string `json:"type,omitempty"`
	Status  string `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Count   int32  `json:"count,omitempty"`
}

// JobSummary is one replicated job: its Job counts from status.jobsStatus and when its Jobs started and ended.
type JobSummary struct {
	Name      string       `json:"name"`
	Ready     int32        `json:"ready"`
	Active    int32        `json:"active"`
	Succeeded int32        `json:"succeeded"`
	Failed    int32        `json:"failed"`
	Suspended int32        `json:"suspended"`
	Start     *metav1.Time `json:"start,omitempty"`
	End       *metav1.Time `json:"end,omitempty"`
	// started is stage.Begun of the counts: the stage the replicated job belongs to has begun.
	started bool
}

// PodSummary is one pod of the JobSet.
type PodSummary struct {
	Name          string `json:"name"`
	ReplicatedJob string `json:"replicatedJob"`
	Rank          string `json:"rank,omitempty"`
	Node          string `json:"node,omitempty"`
	GPUs          int64  `json:"gpus"`
	Phase         string `json:"phase"`
	Status        string `json:"status"`
	Restarts      int32  `json:"restarts"`
	// Started is when the kubelet started the pod (status.startTime).
	Started *metav1.Time `json:"started,omitempty"`
	// Claims are the pod's DRA claims; GPUs counts the devices of GPU classes they ask for when the pod asks
	// for no GPU extended resource.
	Claims []ClaimSummary `json:"claims,omitempty"`
}

// Warning is a Warning Event of the TrainJob or one of its children.
type Warning struct {
	LastSeen metav1.Time `json:"lastSeen"`
	Object   string      `json:"object"`
	Reason   string      `json:"reason"`
	Message  string      `json:"message"`
	Count    int32       `json:"count,omitempty"`
}

// Objects are what a Summary is built from.
type Objects struct {
	TrainJob *trainer.TrainJob
	// Jobs and Pods are those of the TrainJob's JobSet: their controller chain ends at the JobSet the
	// TrainJob controls (cmdutil.Lineage), not merely its labels.
	Jobs []batchv1.Job
	Pods []corev1.Pod
	// Events of the namespace; Summarize keeps those of the TrainJob and its children.
	Events []corev1.Event
	// Nodes of the cluster, read only while a pod is unschedulable (nil otherwise, or when they cannot be
	// read): they tell whether taints alone keep the pods off them.
	Nodes []corev1.Node
	// Queue holds Kueue's objects of a TrainJob in a LocalQueue; nil when not read (no such label, or no
	// Kueue client).
	Queue *QueueObjects
	// Worker is what was read of the worker cluster of a TrainJob that MultiKueue dispatched; Jobs, Pods,
	// Nodes and the Events of the TrainJob's children are then the worker's.
	Worker *WorkerObjects
	// JobSet is the TrainJob's JobSet and FailureLog the end of the log of its first failed container, kept
	// only when a container failed (nil otherwise, or when they cannot be read).
	JobSet     *jobsetv1alpha2.JobSet
	FailureLog *FailureLog
	// Claims are the namespace's ResourceClaims, read only when a pod has DRA claims (nil otherwise, or
	// when they cannot be read).
	Claims []resourcev1.ResourceClaim
	// SickGPUs says why the GPUs of the node of the first failed container are sick; nil when they are not, or
	// when it was not read.
	SickGPUs *gpuhealth.Sickness
}

// FailureLog is the end of the log of one container, or why it could not be read.
type FailureLog struct {
	Pod, Container string
	Previous       bool
	Lines          []string
	Unavailable    string
	// Err is the error of reading the log, when that is why it is unavailable.
	Err error
}

// QueueObjects are Kueue's objects about a TrainJob in a LocalQueue.
type QueueObjects struct {
	// Served tells whether Kueue's API is served; nothing below is set when it is not.
	Served bool
	// Workload is the TrainJob's, among Workloads, the namespace's; nil while Kueue has not made it, or when
	// Workloads cannot be read (Unreadable then says why).
	Workload   *kueue.Workload
	Workloads  []kueue.Workload
	Unreadable string
	// LocalQueue is the TrainJob's LocalQueue, nil when missing or unreadable.
	LocalQueue *kueue.LocalQueue
	// Pending is the Workload's entry in Kueue's visibility API; nil when that is not served, or does not list it.
	Pending *kueue.PendingWorkload
	// Nodes are the nodes of the Workload's topology assignment, when it has one and they could be read.
	Nodes []corev1.Node
}

// stageOf is the TrainJob's stage: Queued when its Workload says Kueue holds it.
func stageOf(in Objects) stage.Stage {
	if q := in.Queue; q != nil && q.Served && q.Unreadable == "" {
		return stage.InQueue(in.TrainJob, q.Workload.Stage())
	}
	return stage.Of(in.TrainJob)
}

// Summarize builds the summary of in at time now.
func Summarize(in Objects, now time.Time) *Summary {
	tj := in.TrainJob
	s := &Summary{
		APIVersion: SummaryAPIVersion,
		Kind:       SummaryKind,
		Name:       tj.Name,
		Namespace:  tj.Namespace,
		Runtime:    RuntimeName(tj),
		Created:    tj.CreationTimestamp,
		Stage:      stageOf(in),
		Conditions: tj.Status.Conditions,
		Timeline:   []TimelineEntry{},
		Jobs:       []JobSummary{},
		Pods:       []PodSummary{},
	}
	if ts := tj.Status.TrainerStatus; ts != nil {
		s.Progress = &Progress{Percentage: ts.ProgressPercentage, RemainingSeconds: ts.EstimatedRemainingSeconds,
			Metrics: ts.Metrics, LastUpdated: ts.LastUpdatedTime}
	}
	pods := slices.Clone(in.Pods)
	slices.SortFunc(pods, comparePods)
	for i := range pods {
		s.Pods = append(s.Pods, summarizePod(&pods[i], in.Claims))
	}
	s.Jobs = summarizeJobs(tj, in.Jobs, pods)
	s.Stages = stageSpans(tj, s.Stage, s.Jobs, now)
	s.Timeline = timeline(tj, workloadOf(in), in.Events)
	s.Warnings = warnings(in)
	s.Queue = summarizeQueue(in, s.Stage)
	s.Worker = summarizeWorker(in, s.Stage.Terminal())
	if !s.Stage.Terminal() && s.Stage != stage.Suspended && s.Stage != stage.Queued {
		s.BlockedByTaint = taintBlock(tj, in.Pods, in.Nodes)
	}
	if s.Stage != stage.Complete {
		s.FirstFailure = firstFailure(in)
	}
	s.Reason = reason(s, in)
	s.recorded = lastRecorded(in, s)
	return s
}

// firstFailure is the first failure of in's containers, with the log read of it and why the GPUs of its node
// are sick, if they are.
func firstFailure(in Objects) *failure.Failure {
	f := failure.First(failure.Objects{Pods: in.Pods, Jobs: in.Jobs, JobSet: in.JobSet})
	if l := in.FailureLog; f != nil && l != nil && l.Pod == f.Pod && l.Container == f.Container && l.Previous == f.Previous {
		f.Log, f.LogUnavailable = l.Lines, l.Unavailable
	}
	if g := in.SickGPUs; f != nil && g != nil && g.Node == f.Node {
		f.SickGPUs = g
	}
	return f
}

// lastRecorded is the newest time the cluster recorded about the TrainJob and its children: its creation,
// conditions and progress report, the start, end and conditions of its Jobs and pods and their containers,
// and the Events shown. A change that a summary shows but whose time no object records (a count in
// jobsStatus, the reason of a stage) happened at or before it, and after the summary before.
func lastRecorded(in Objects, s *Summary) metav1.Time {
	last := in.TrainJob.CreationTimestamp
	see := func(t *metav1.Time) {
		if t != nil && last.Before(t) {
			last = *t
		}
	}
	for i := range in.TrainJob.Status.Conditions {
		see(&in.TrainJob.Status.Conditions[i].LastTransitionTime)
	}
	if p := s.Progress; p != nil {
		see(&p.LastUpdated)
	}
	for i := range in.Jobs {
		j := &in.Jobs[i]
		see(&j.CreationTimestamp)
		see(j.Status.StartTime)
		see(j.Status.CompletionTime)
		for k := range j.Status.Conditions {
			see(&j.Status.Conditions[k].LastTransitionTime)
		}
	}
	for i := range in.Pods {
		p := &in.Pods[i]
		see(&p.CreationTimestamp)
		see(p.Status.StartTime)
		for k := range p.Status.Conditions {
			see(&p.Status.Conditions[k].LastTransitionTime)
		}
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			for _, st := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
				if st.Running != nil {
					see(&st.Running.StartedAt)
				}
				if st.Terminated != nil {
					see(&st.Terminated.StartedAt)
					see(&st.Terminated.FinishedAt)
				}
			}
		}
	}
	for i := range s.Timeline {
		see(&s.Timeline[i].Time)
	}
	for i := range s.Warnings {
		see(&s.Warnings[i].LastSeen)
	}
	return last
}

// RuntimeName is Kind/name of the TrainJob's runtime; the kind defaults as upstream's does.
func RuntimeName(tj *trainer.TrainJob) string {
	return ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind) + "/" + tj.Spec.RuntimeRef.Name
}

// StageLine is the summary's first line: "Stage: reason".
func (s *Summary) StageLine() string {
	if s.Reason == "" {
		return string(s.Stage)
	}
	return string(s.Stage) + ": " + s.Reason
}
