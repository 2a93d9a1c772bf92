package status

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/failure"
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
	// Note says what could not be known: Kueue not installed, Workloads the user may not read, no Workload yet.
	Note string `json:"note,omitempty"`
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
const PositionPending = "pending"

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
	// Jobs and Pods are those of the TrainJob's JobSet.
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
	// JobSet is the TrainJob's JobSet and FailureLog the end of the log of its first failed container, read
	// only when a container failed (nil otherwise, or when they cannot be read).
	JobSet     *jobsetv1alpha2.JobSet
	FailureLog *FailureLog
}

// FailureLog is the end of the log of one container, or why it could not be read.
type FailureLog struct {
	Pod, Container string
	Previous       bool
	Lines          []string
	Unavailable    string
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
}

// stageOf is the TrainJob's stage: Queued when its Workload says Kueue holds it.
func stageOf(in Objects) stage.Stage {
	if q := in.Queue; q != nil && q.Served && q.Unreadable == "" {
		return stage.InQueue(in.TrainJob, q.Workload.Stage())
	}
	return stage.Of(in.TrainJob)
}

// maxWarnings is how many recent warnings a summary keeps.
const maxWarnings = 10

// eventConditionSlack is how far apart an Event and a condition transition with the same reason may be and
// still be one transition (a controller records the Event in the reconcile that writes the condition).
const eventConditionSlack = 5 * time.Second

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
		s.Pods = append(s.Pods, summarizePod(&pods[i]))
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

// firstFailure is the first failure of in's containers, with the log read of it.
func firstFailure(in Objects) *failure.Failure {
	f := failure.First(failure.Objects{Pods: in.Pods, Jobs: in.Jobs, JobSet: in.JobSet})
	if l := in.FailureLog; f != nil && l != nil && l.Pod == f.Pod && l.Container == f.Container && l.Previous == f.Previous {
		f.Log, f.LogUnavailable = l.Lines, l.Unavailable
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

// stepOrder ranks replicated jobs in pipeline order: initializers, launcher, node, then any other.
func stepOrder(name string) int {
	switch name {
	case trainer.DatasetInitializerName:
		return 0
	case trainer.ModelInitializerName:
		return 1
	case trainer.Launcher:
		return 2
	case trainer.Node:
		return 3
	}
	return 4
}

func compareSteps(a, b string) int {
	return cmp.Or(cmp.Compare(stepOrder(a), stepOrder(b)), strings.Compare(a, b))
}

func comparePods(a, b corev1.Pod) int {
	rank := func(p corev1.Pod) int {
		n, err := strconv.Atoi(podRank(&p))
		if err != nil {
			return -1
		}
		return n
	}
	return cmp.Or(
		compareSteps(a.Labels[jobsetv1alpha2.ReplicatedJobNameKey], b.Labels[jobsetv1alpha2.ReplicatedJobNameKey]),
		strings.Compare(a.Labels[jobsetv1alpha2.JobIndexKey], b.Labels[jobsetv1alpha2.JobIndexKey]),
		cmp.Compare(rank(a), rank(b)),
		a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
		strings.Compare(a.Name, b.Name))
}

// podRank is the pod's completion index: the node rank for Trainer's torch runtime.
func podRank(p *corev1.Pod) string {
	if r, ok := p.Labels[batchv1.JobCompletionIndexAnnotation]; ok {
		return r
	}
	return p.Annotations[batchv1.JobCompletionIndexAnnotation]
}

func summarizePod(p *corev1.Pod) PodSummary {
	ps := PodSummary{
		Name:          p.Name,
		ReplicatedJob: p.Labels[jobsetv1alpha2.ReplicatedJobNameKey],
		Rank:          podRank(p),
		Node:          p.Spec.NodeName,
		Phase:         string(p.Status.Phase),
		Status:        podStatus(p),
		Started:       p.Status.StartTime,
	}
	for _, c := range p.Spec.Containers {
		ps.GPUs += pipeline.GPUsPerNode(c.Resources)
	}
	for _, cs := range p.Status.ContainerStatuses {
		ps.Restarts += cs.RestartCount
	}
	return ps
}

// podStatus is what kubectl get pods shows in STATUS, shortened: the reason of a waiting or failed container,
// Unschedulable, Terminating, or the phase.
func podStatus(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	if _, ok := unschedulable(p); ok {
		return corev1.PodReasonUnschedulable
	}
	if p.Status.Phase == corev1.PodFailed && p.Status.Reason != "" {
		return p.Status.Reason // Evicted, DeadlineExceeded: what happened to the pod, not how its containers ended
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			return cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 && cs.State.Terminated.Reason != "":
			return cs.State.Terminated.Reason
		}
	}
	if p.Status.Phase == corev1.PodSucceeded {
		return "Completed"
	}
	if p.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(p.Status.Phase)
}

// summarizeJobs merges status.jobsStatus with the Jobs' start and end times, in pipeline order. Without
// Jobs to read (no right to, or gone) the times come from the pods.
func summarizeJobs(tj *trainer.TrainJob, jobs []batchv1.Job, pods []corev1.Pod) []JobSummary {
	if len(jobs) == 0 {
		jobs = jobsFromPods(pods)
	}
	byName := map[string]*JobSummary{}
	out := []JobSummary{}
	for _, js := range tj.Status.JobsStatus {
		out = append(out, JobSummary{Name: js.Name, Ready: ptr.Deref(js.Ready, 0), Active: ptr.Deref(js.Active, 0),
			Succeeded: ptr.Deref(js.Succeeded, 0), Failed: ptr.Deref(js.Failed, 0), Suspended: ptr.Deref(js.Suspended, 0),
			started: stage.Begun(tj.Status.JobsStatus, js)})
	}
	for _, j := range jobs {
		name := j.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
		if name != "" && !slices.ContainsFunc(out, func(s JobSummary) bool { return s.Name == name }) {
			out = append(out, JobSummary{Name: name})
		}
	}
	slices.SortStableFunc(out, func(a, b JobSummary) int { return compareSteps(a.Name, b.Name) })
	for i := range out {
		byName[out[i].Name] = &out[i]
	}
	running := map[string]bool{} // replicated jobs with a Job that has not finished
	for _, j := range jobs {
		s := byName[j.Labels[jobsetv1alpha2.ReplicatedJobNameKey]]
		if s == nil {
			continue
		}
		s.Start = earliest(s.Start, j.Status.StartTime)
		if end := jobEnd(&j); end != nil {
			s.End = latest(s.End, end)
		} else {
			running[s.Name] = true
		}
	}
	for i := range out {
		if running[out[i].Name] {
			out[i].End = nil
		}
	}
	return out
}

// jobsFromPods stands in for the Jobs of the pods' replicated jobs: one per replicated job, started when its
// first pod started and finished when its last container finished, once every pod has finished.
func jobsFromPods(pods []corev1.Pod) []batchv1.Job {
	var jobs []batchv1.Job
	index := map[string]int{}
	for _, p := range pods {
		rj := p.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
		i, ok := index[rj]
		if !ok {
			i = len(jobs)
			index[rj] = i
			jobs = append(jobs, batchv1.Job{})
			jobs[i].Labels = map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: rj}
			jobs[i].Status.CompletionTime = &metav1.Time{}
		}
		j := &jobs[i]
		j.Status.StartTime = earliest(j.Status.StartTime, p.Status.StartTime)
		finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if !finished || j.Status.CompletionTime == nil {
			j.Status.CompletionTime = nil
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				j.Status.CompletionTime = latest(j.Status.CompletionTime, &t.FinishedAt)
			}
		}
	}
	for i := range jobs {
		if c := jobs[i].Status.CompletionTime; c != nil && c.IsZero() {
			jobs[i].Status.CompletionTime = nil
		}
	}
	return jobs
}

// jobEnd is when a Job finished: its completionTime, or when it was marked Failed.
func jobEnd(j *batchv1.Job) *metav1.Time {
	if j.Status.CompletionTime != nil {
		return j.Status.CompletionTime
	}
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return &c.LastTransitionTime
		}
	}
	return nil
}

func earliest(a, b *metav1.Time) *metav1.Time {
	if a == nil || (b != nil && b.Before(a)) {
		return b
	}
	return a
}

func latest(a, b *metav1.Time) *metav1.Time {
	if a == nil || (b != nil && a.Before(b)) {
		return b
	}
	return a
}

// stageSpans lays the pipeline out: Pending from creation until the first Job started, Initializing over the
// initializer Jobs, Training over the trainer Jobs, and the terminal stage at its condition's transition.
// A replicated job counts once its stage has begun (stage.Begun, or a Job of it ended): an active Job
// whose pods wait for a node leaves the TrainJob Pending, so it neither ends Pending nor starts its stage.
// A stage that began starts when its first Job did (that includes how long its pods waited for nodes).
func stageSpans(tj *trainer.TrainJob, current stage.Stage, jobs []JobSummary, now time.Time) []StageSpan {
	var terminal *metav1.Condition
	if current.Terminal() {
		terminal = meta.FindStatusCondition(tj.Status.Conditions, string(current))
	}
	var terminalAt *metav1.Time
	if terminal != nil {
		terminalAt = &terminal.LastTransitionTime
	}
	var init, train StageSpan
	init.Name, train.Name = stage.Initializing, stage.Training
	initDone, trainDone, hasInit := true, true, false
	var firstStart *metav1.Time
	for _, j := range jobs {
		hasInit = hasInit || stage.IsInitializer(j.Name)
		if !j.started && j.End == nil {
			continue
		}
		span, done := &train, &trainDone
		if stage.IsInitializer(j.Name) {
			span, done = &init, &initDone
		}
		span.Start = earliest(span.Start, j.Start)
		firstStart = earliest(firstStart, j.Start)
		if j.End == nil {
			*done = false
		} else {
			span.End = latest(span.End, j.End)
		}
	}
	if !initDone {
		init.End = nil
	}
	if !trainDone {
		train.End = nil
	}
	created := tj.CreationTimestamp.DeepCopy()
	pending := StageSpan{Name: stage.Pending, Start: created, End: firstStart}
	spans := []StageSpan{pending}
	if hasInit || tj.Spec.Initializer != nil {
		spans = append(spans, init)
	}
	spans = append(spans, train)
	// Jobs ran (jobsStatus counts them) but none can be read to tell when: Pending ended, nobody knows when.
	pendingEndUnknown := firstStart == nil && slices.ContainsFunc(jobs, func(j JobSummary) bool { return j.started })
	// A terminal TrainJob closes every stage that had begun: nothing runs any more.
	for i := range spans {
		if i == 0 && pendingEndUnknown {
			continue
		}
		if terminalAt != nil && spans[i].Start != nil && spans[i].End == nil {
			spans[i].End = terminalAt
		}
	}
	if terminalAt != nil {
		spans = append(spans, StageSpan{Name: current, Start: terminalAt, End: terminalAt})
	}
	for i := range spans {
		sp := &spans[i]
		switch {
		case sp.Start == nil, i == 0 && pendingEndUnknown:
		case sp.End != nil:
			sp.Duration = sp.End.Sub(sp.Start.Time).String()
		default:
			sp.Duration = now.Sub(sp.Start.Time).Truncate(time.Second).String()
		}
	}
	return spans
}

// workloadConditions are the conditions of a Kueue Workload that the timeline shows: its way through the
// queue. (PodsReady and Finished repeat what the TrainJob's own conditions say.)
var workloadConditions = []string{kueue.ConditionQuotaReserved, kueue.ConditionAdmitted, kueue.ConditionEvicted,
	kueue.ConditionPreempted, kueue.ConditionRequeued}

// timeline merges creation, the conditions' transitions and the TrainJob's Events, and those of its Kueue
// Workload wl when it has one. An Event with the reason of a condition transition of the same object recorded
// within eventConditionSlack of it is the same transition and is dropped.
func timeline(tj *trainer.TrainJob, wl *kueue.Workload, events []corev1.Event) []TimelineEntry {
	created := tj.CreationTimestamp
	entry := func(t metav1.Time) TimelineEntry {
		return TimelineEntry{Time: t, Since: t.Sub(created.Time).String()}
	}
	out := []TimelineEntry{}
	e := entry(created)
	e.Source = SourceCreated
	out = append(out, e)
	addConditions := func(source string, conds []metav1.Condition) {
		for _, c := range conds {
			e := entry(c.LastTransitionTime)
			e.Source, e.Type, e.Status, e.Reason, e.Message = source, c.Type, string(c.Status), c.Reason, c.Message
			out = append(out, e)
		}
	}
	addEvents := func(source string, conds []metav1.Condition, ours func(*corev1.Event) bool) {
		for _, ev := range events {
			if !ours(&ev) {
				continue
			}
			t := eventTime(&ev)
			if slices.ContainsFunc(conds, func(c metav1.Condition) bool {
				d := c.LastTransitionTime.Sub(t.Time)
				return c.Reason == ev.Reason && d <= eventConditionSlack && d >= -eventConditionSlack
			}) {
				continue
			}
			e := entry(t)
			e.Source, e.Type, e.Reason, e.Message = source, ev.Type, ev.Reason, ev.Message
			if ev.Count > 1 {
				e.Count = ev.Count
			}
			out = append(out, e)
		}
	}
	addConditions(SourceCondition, tj.Status.Conditions)
	addEvents(SourceEvent, tj.Status.Conditions, func(ev *corev1.Event) bool { return isTrainJobEvent(tj, ev) })
	if wl != nil {
		conds := slices.DeleteFunc(slices.Clone(wl.Status.Conditions), func(c metav1.Condition) bool {
			return !slices.Contains(workloadConditions, c.Type)
		})
		addConditions(SourceWorkloadCondition, conds)
		addEvents(SourceWorkloadEvent, conds, func(ev *corev1.Event) bool { return isWorkloadEvent(wl, ev) })
	}
	slices.SortStableFunc(out, func(a, b TimelineEntry) int { return a.Time.Compare(b.Time.Time) })
	return out
}

// workloadOf is the TrainJob's Kueue Workload, if read.
func workloadOf(in Objects) *kueue.Workload {
	if in.Queue == nil {
		return nil
	}
	return in.Queue.Workload
}

func isWorkloadEvent(wl *kueue.Workload, ev *corev1.Event) bool {
	o := ev.InvolvedObject
	if o.Kind != "Workload" {
		return false
	}
	if o.UID != "" {
		return o.UID == wl.UID
	}
	return o.Name == wl.Name
}

// summarizeQueue is what Kueue says of a TrainJob in a LocalQueue, in stage st.
func summarizeQueue(in Objects, st stage.Stage) *Queue {
	qo := in.Queue
	if qo == nil {
		return nil
	}
	q := &Queue{LocalQueue: in.TrainJob.Labels[kueue.QueueLabel]}
	switch {
	case !qo.Served && qo.Unreadable != "":
		q.Note = qo.Unreadable
		return q
	case !qo.Served:
		q.Note = "Kueue is not installed: the API server does not serve " + kueue.Group
		return q
	}
	if lq := qo.LocalQueue; lq != nil {
		q.ClusterQueue = lq.Spec.ClusterQueue
	}
	wl := qo.Workload
	switch {
	case qo.Unreadable != "":
		q.Note = "cannot read Kueue's Workloads: " + qo.Unreadable
		return q
	case wl == nil:
		q.Note = "Kueue has not made the TrainJob's Workload yet"
		return q
	}
	q.Workload, q.Priority, q.PriorityClass = wl.Name, wl.Spec.Priority, wl.PriorityClass()
	q.Active, q.Admitted, q.AdmittedAt, q.NotAdmitted = wl.Active(), wl.Admitted(), wl.AdmittedAt(), wl.NotAdmitted()
	if cq := wl.ClusterQueue(); cq != "" {
		q.ClusterQueue = cq
	}
	if st == stage.Queued {
		q.Position = PositionPending
		if p := qo.Pending; p != nil {
			q.PositionInClusterQueue, q.PositionInLocalQueue = &p.PositionInClusterQueue, &p.PositionInLocalQueue
			q.Position = fmt.Sprintf("%d ahead in ClusterQueue %s, %d in LocalQueue %s", p.PositionInClusterQueue, q.ClusterQueue,
				p.PositionInLocalQueue, q.LocalQueue)
		}
	}
	q.Evictions = evictions(wl, qo.Workloads, in.Events)
	return q
}

// evictions are the times Kueue evicted wl, oldest first: from its Events (EvictedDueTo<Reason>), which count
// every eviction while the API server keeps them, and from its Evicted condition while it is True (an
// eviction whose Event is gone, or not recorded yet). A preemption names its preemptor when it is among wls.
func evictions(wl *kueue.Workload, wls []kueue.Workload, events []corev1.Event) []Eviction {
	evicted := meta.FindStatusCondition(wl.Status.Conditions, kueue.ConditionEvicted)
	if evicted != nil && evicted.Status != metav1.ConditionTrue {
		evicted = nil
	}
	var out []Eviction
	for _, ev := range events {
		reason, ok := strings.CutPrefix(ev.Reason, kueue.EvictedEventPrefix)
		if !ok || !isWorkloadEvent(wl, &ev) {
			continue
		}
		e := Eviction{Time: eventTime(&ev), Reason: reason, Message: ev.Message}
		if ev.Count > 1 {
			e.Count = ev.Count
		}
		out = append(out, e)
		if evicted != nil && reason == evicted.Reason {
			if d := eventLastSeen(&ev).Sub(evicted.LastTransitionTime.Time); d <= eventConditionSlack && d >= -eventConditionSlack {
				evicted = nil // the Event of the eviction the condition tells
			}
		}
	}
	if evicted != nil {
		out = append(out, Eviction{Time: evicted.LastTransitionTime, Reason: evicted.Reason, Message: evicted.Message})
	}
	for i := range out {
		out[i].By = kueue.Preemptor(out[i].Message, wls)
	}
	slices.SortStableFunc(out, func(a, b Eviction) int { return a.Time.Compare(b.Time.Time) })
	return out
}

func isTrainJobEvent(tj *trainer.TrainJob, ev *corev1.Event) bool {
	o := ev.InvolvedObject
	if o.UID != "" {
		return o.UID == tj.UID
	}
	return o.Kind == trainer.TrainJobKind && o.Name == tj.Name
}

// eventTime is when an Event first happened: firstTimestamp (core/v1 recorders) or eventTime (events/v1).
func eventTime(ev *corev1.Event) metav1.Time {
	switch {
	case !ev.FirstTimestamp.IsZero():
		return ev.FirstTimestamp
	case !ev.EventTime.IsZero():
		return metav1.Time{Time: ev.EventTime.Time}
	}
	return ev.CreationTimestamp
}

// eventLastSeen is when an Event last happened.
func eventLastSeen(ev *corev1.Event) metav1.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return metav1.Time{Time: ev.Series.LastObservedTime.Time}
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp
	}
	return eventTime(ev)
}

// warnings are the Warning Events of the TrainJob, its JobSet, its Jobs and pods, newest first. Pods of
// earlier attempts are gone, so an Event's pod belongs to the TrainJob when its name extends a Job's name.
func warnings(in Objects) []Warning {
	tj := in.TrainJob
	jobNames := map[string]bool{}
	for _, j := range in.Jobs {
		jobNames[j.Name] = true
	}
	podNames := map[string]bool{}
	for _, p := range in.Pods {
		podNames[p.Name] = true
	}
	ours := func(ev *corev1.Event) bool {
		o := ev.InvolvedObject
		switch o.Kind {
		case trainer.TrainJobKind:
			return isTrainJobEvent(tj, ev)
		case "JobSet":
			return o.Name == tj.Name
		case "Job":
			return jobNames[o.Name]
		case "Pod":
			if podNames[o.Name] {
				return true
			}
			for j := range jobNames {
				if strings.HasPrefix(o.Name, j+"-") {
					return true
				}
			}
		}
		return false
	}
	var out []Warning
	for _, ev := range in.Events {
		if ev.Type != corev1.EventTypeWarning || !ours(&ev) {
			continue
		}
		w := Warning{LastSeen: eventLastSeen(&ev), Object: ev.InvolvedObject.Kind + "/" + ev.InvolvedObject.Name,
			Reason: ev.Reason, Message: ev.Message}
		if ev.Count > 1 {
			w.Count = ev.Count
		}
		out = append(out, w)
	}
	slices.SortStableFunc(out, func(a, b Warning) int {
		return cmp.Or(b.LastSeen.Compare(a.LastSeen.Time), strings.Compare(a.Object, b.Object))
	})
	if len(out) > maxWarnings {
		out = out[:maxWarnings]
	}
	return out
}

// reason says why the TrainJob is in its stage, or what it waits for.
func reason(s *Summary, in Objects) string {
	tj := in.TrainJob
	conds := tj.Status.Conditions
	switch s.Stage {
	case stage.Failed, stage.Complete:
		c := meta.FindStatusCondition(conds, string(s.Stage))
		return joinReason(c.Reason, c.Message)
	case stage.Queued:
		switch q := s.Queue; {
		case q.NotAdmitted != "":
			return q.NotAdmitted
		case q.Workload == "":
			return "waiting for Kueue to make the TrainJob's Workload"
		}
		return "waiting for Kueue to admit Workload " + s.Queue.Workload
	case stage.Suspended:
		if q := s.Queue; q != nil && q.Workload != "" && !q.Active {
			return "stopped through Kueue: Workload " + q.Workload + " has spec.active=false (kubectl trainjob resume queues it again)"
		}
		if c := meta.FindStatusCondition(conds, trainer.TrainJobSuspended); c != nil && c.Status == metav1.ConditionTrue {
			return c.Message
		}
		return "spec.suspend is true"
	}
	if b := s.BlockedByTaint; b != nil {
		return b.Reason()
	}
	if r := podTrouble(in.Pods); r != "" {
		return r
	}
	if c := meta.FindStatusCondition(conds, trainer.TrainJobComponentsCreated); c != nil && c.Status == metav1.ConditionFalse {
		return joinReason(c.Reason, c.Message)
	}
	switch s.Stage {
	case stage.Initializing:
		if steps := activeSteps(s.Jobs, true); len(steps) > 0 {
			return "running " + strings.Join(steps, ", ") + podsRunning(s.Pods, stage.IsInitializer)
		}
		return "initializers done, waiting for the trainer's Jobs"
	case stage.Training:
		if steps := activeSteps(s.Jobs, false); len(steps) > 0 {
			return "running " + strings.Join(steps, ", ") + podsRunning(s.Pods, func(rj string) bool { return !stage.IsInitializer(rj) })
		}
		return "the trainer's Jobs ended, waiting for the controller to mark the TrainJob Complete or Failed"
	}
	// Pending.
	if !jobSetSeen(in) {
		for _, w := range s.Warnings {
			if w.Object == trainer.TrainJobKind+"/"+tj.Name {
				return joinReason(w.Reason, w.Message)
			}
		}
		return "waiting for the controller to create JobSet " + tj.Name
	}
	if len(in.Pods) == 0 {
		return "waiting for the pods of JobSet " + tj.Name
	}
	return "waiting for pods to start"
}

// jobSetSeen tells whether the TrainJob's JobSet is known to exist, without reading it: the TrainJob holds
// its counts, our operator said it created it, or it has Jobs or pods.
func jobSetSeen(in Objects) bool {
	return len(in.TrainJob.Status.JobsStatus) > 0 || len(in.Jobs) > 0 || len(in.Pods) > 0 ||
		meta.IsStatusConditionTrue(in.TrainJob.Status.Conditions, trainer.TrainJobComponentsCreated)
}

func joinReason(reason, message string) string {
	if reason == "" || message == "" {
		return reason + message
	}
	return reason + ": " + message
}

func activeSteps(jobs []JobSummary, initializers bool) []string {
	var steps []string
	for _, j := range jobs {
		if j.Active > 0 && stage.IsInitializer(j.Name) == initializers {
			steps = append(steps, j.Name)
		}
	}
	return steps
}

// podsRunning is " (n/m pods running)" over the pods of the steps keep selects.
func podsRunning(pods []PodSummary, keep func(replicatedJob string) bool) string {
	running, total := 0, 0
	for _, p := range pods {
		if !keep(p.ReplicatedJob) {
			continue
		}
		total++
		if p.Phase == string(corev1.PodRunning) {
			running++
		}
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d/%d pods running)", running, total)
}

// podTrouble names what keeps pods from running: unschedulable pods with the scheduler's message, or a
// container that cannot start (image pull, crash loop, bad configuration).
func podTrouble(pods []corev1.Pod) string {
	n, msg := 0, ""
	for _, p := range pods {
		if m, ok := unschedulable(&p); ok {
			n++
			msg = cmp.Or(msg, m)
		}
	}
	if n > 0 {
		return joinReason(fmt.Sprintf("%d %s unschedulable", n, plural(n, "pod", "pods")), msg)
	}
	for _, p := range pods {
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if w := cs.State.Waiting; w != nil && (w.Reason == "CrashLoopBackOff" || failure.CannotStart(w.Reason)) {
				return joinReason(fmt.Sprintf("pod %s: %s", p.Name, w.Reason), w.Message)
			}
		}
	}
	return ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// StageLine is the summary's first line: "Stage: reason".
func (s *Summary) StageLine() string {
	if s.Reason == "" {
		return string(s.Stage)
	}
	return string(s.Stage) + ": " + s.Reason
}

// unschedulable tells whether the scheduler found no node for p, and its message.
func unschedulable(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}
