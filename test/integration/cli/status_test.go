package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/status"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// The fixtures below write what upstream Kubeflow Trainer's controller, the JobSet and Job controllers, the
// scheduler and kubelets would write (objects, status, Events) by hand, with times set relative to each
// TrainJob's creationTimestamp, so the read commands are tested against exactly that.

// fixture creates objects in one namespace.
type fixture struct {
	t          *testing.T
	c          client.Client
	ns         string
	eventCount int
}

// newFixture is a fixture in a new namespace of the shared API server (sharedCluster).
func newFixture(t *testing.T) (*cluster.Cluster, *fixture) {
	c := sharedCluster(t)
	return c, fixtureOn(t, c)
}

// fixtureOn is a fixture in a new namespace of cluster c, for subtests that share one cluster.
func fixtureOn(t *testing.T, c *cluster.Cluster) *fixture {
	cl := adminClient(t, c)
	return &fixture{t: t, c: cl, ns: newNamespace(t, cl)}
}

// at is the time d after tj's creation.
func at(tj *trainer.TrainJob, d time.Duration) metav1.Time {
	return metav1.NewTime(tj.CreationTimestamp.Add(d))
}

func atp(tj *trainer.TrainJob, d time.Duration) *metav1.Time { t := at(tj, d); return &t }

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	obj.SetNamespace(f.ns)
	if err := f.c.Create(f.t.Context(), obj); err != nil {
		f.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (f *fixture) updateStatus(obj client.Object) {
	f.t.Helper()
	if err := f.c.Status().Update(f.t.Context(), obj); err != nil {
		f.t.Fatalf("update status of %T %s: %v", obj, obj.GetName(), err)
	}
}

// trainJob creates a TrainJob: a torch job on numNodes nodes of 8 GPUs each, with initializers when init.
func (f *fixture) trainJob(name string, numNodes int32, init bool, mutate ...func(*trainer.TrainJob)) *trainer.TrainJob {
	f.t.Helper()
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "nlp"}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{
				Image:    ptr.To("ghcr.io/example/llama-ft:1.0"),
				NumNodes: ptr.To(numNodes),
				ResourcesPerNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{
					"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("16")}},
			},
		},
	}
	if init {
		tj.Spec.Initializer = &trainer.Initializer{
			Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca")},
			Model:   &trainer.ModelInitializer{StorageUri: ptr.To("hf://meta-llama/Llama-3.2-1B")},
		}
	}
	for _, m := range mutate {
		m(tj)
	}
	f.create(tj)
	return tj
}

func condition(typ, reason, message string, status metav1.ConditionStatus, t metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: t}
}

func jobStatus(name string, ready, active, succeeded, failed int32) trainer.JobStatus {
	return trainer.JobStatus{Name: name, Ready: ptr.To(ready), Active: ptr.To(active), Succeeded: ptr.To(succeeded),
		Failed: ptr.To(failed), Suspended: ptr.To[int32](0)}
}

// jobSet creates the TrainJob's JobSet, owned by it as upstream's controller makes it.
func (f *fixture) jobSet(tj *trainer.TrainJob, replicatedJobs ...string) {
	f.t.Helper()
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: tj.Name, OwnerReferences: []metav1.OwnerReference{owner(tj)}}}
	for _, rj := range replicatedJobs {
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, jobsetv1alpha2.ReplicatedJob{Name: rj, Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate(rj)}}})
	}
	f.create(js)
}

// controller is the controller reference to the object of obj's kind named name, as its controller sets it;
// none when there is no such object.
func (f *fixture) controller(obj client.Object, name string) []metav1.OwnerReference {
	f.t.Helper()
	if err := f.c.Get(f.t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, obj); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		f.t.Fatal(err)
	}
	gvk, err := apiutil.GVKForObject(obj, f.c.Scheme())
	if err != nil {
		f.t.Fatal(err)
	}
	return []metav1.OwnerReference{*metav1.NewControllerRef(obj, gvk)}
}

func owner(tj *trainer.TrainJob) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name,
		UID: tj.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func podTemplate(container string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: container, Image: "ghcr.io/example/llama-ft:1.0"}}}}
}

// jobTimes are when a Job started and ended (relative to the TrainJob's creation); end < 0: still running.
type jobTimes struct {
	start, end time.Duration
	failed     bool
}

// job creates Job <tj>-<rj>-0 of the JobSet, controlled by it (when it exists) as the JobSet controller makes
// it, with the status the Job controller writes.
func (f *fixture) job(tj *trainer.TrainJob, rj string, pods int32, tm jobTimes) {
	f.t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: tj.Name + "-" + rj + "-0", Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey: tj.Name, jobsetv1alpha2.ReplicatedJobNameKey: rj, jobsetv1alpha2.JobIndexKey: "0"},
			OwnerReferences: f.controller(&jobsetv1alpha2.JobSet{}, tj.Name)},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(pods), Completions: ptr.To(pods), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit: ptr.To[int32](0), Template: podTemplate(rj)},
	}
	f.create(j)
	j.Status.StartTime = atp(tj, tm.start)
	switch {
	case tm.end < 0:
		j.Status.Active = pods
	case tm.failed:
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: at(tj, tm.end)},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: at(tj, tm.end)},
		}
	default:
		j.Status.Succeeded = pods
		j.Status.CompletedIndexes = completedIndexes(pods)
		j.Status.CompletionTime = atp(tj, tm.end)
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: at(tj, tm.end)},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: at(tj, tm.end)},
		}
	}
	j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	f.updateStatus(j)
}

func completedIndexes(n int32) string {
	if n == 1 {
		return "0"
	}
	return "0-" + strconv.Itoa(int(n-1))
}

// podState is the state of one simulated pod.
type podState struct {
	rj, node    string
	rank        int
	gpus        int64
	phase       corev1.PodPhase
	started     time.Duration
	finished    time.Duration // when phase is Succeeded or Failed
	restarts    int32
	exitCode    int32  // a Failed pod's container's (default 1)
	exitReason  string // a Failed pod's container's (default Error)
	waiting     string // a waiting container's reason
	unscheduled string // the scheduler's message for an unschedulable pod
}

// pod creates a pod of the TrainJob's JobSet, controlled by its Job (when the fixture made it) as the Job
// controller makes it, with the status a kubelet (or the scheduler) writes.
func (f *fixture) pod(tj *trainer.TrainJob, s podState) {
	f.t.Helper()
	f.podNamed(tj, fmt.Sprintf("%s-%s-0-%d-x%02d", tj.Name, s.rj, s.rank, s.rank), f.controller(&batchv1.Job{}, tj.Name+"-"+s.rj+"-0"), s)
}

// podNamed creates a pod with the labels of a pod of the TrainJob's JobSet and the given owners.
func (f *fixture) podNamed(tj *trainer.TrainJob, name string, owners []metav1.OwnerReference, s podState) {
	f.t.Helper()
	p := f.newPod(tj, name, owners, s)
	st := p.Status
	f.create(p)
	st.QOSClass = p.Status.QOSClass
	p.Status = st
	f.updateStatus(p)
}

// newPod is the pod podNamed creates, with the status a kubelet (or the scheduler) writes: the API server drops
// the status on create (but its QoS class), so it is written after.
func (f *fixture) newPod(tj *trainer.TrainJob, name string, owners []metav1.OwnerReference, s podState) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: f.ns,
			Labels: map[string]string{
				jobsetv1alpha2.JobSetNameKey: tj.Name, jobsetv1alpha2.ReplicatedJobNameKey: s.rj, jobsetv1alpha2.JobIndexKey: "0",
				batchv1.JobCompletionIndexAnnotation: strconv.Itoa(s.rank), batchv1.JobNameLabel: tj.Name + "-" + s.rj + "-0"},
			OwnerReferences: owners,
		},
		Spec: podTemplate(s.rj).Spec,
	}
	p.Spec.NodeName = s.node
	if s.gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(s.gpus, resource.DecimalSI)}
	}
	p.Status.Phase = s.phase
	if s.unscheduled != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: s.unscheduled, LastTransitionTime: at(tj, s.started)}}
		return p
	}
	p.Status.StartTime = atp(tj, s.started)
	cs := corev1.ContainerStatus{Name: s.rj, Image: "ghcr.io/example/llama-ft:1.0", RestartCount: s.restarts}
	switch s.phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		code, reason := int32(0), "Completed"
		if s.phase == corev1.PodFailed {
			code, reason = cmp.Or(s.exitCode, 1), cmp.Or(s.exitReason, "Error")
		}
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: at(tj, s.started), FinishedAt: at(tj, s.finished)}
	case corev1.PodRunning:
		cs.Ready, cs.Started = true, ptr.To(true)
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: at(tj, s.started)}
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: s.waiting, Message: "Back-off pulling image \"ghcr.io/example/llama-ft:1.0\""}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	return p
}

// pods creates the pods of states of the TrainJob's JobSet, as pod does, 16 at a time: a TrainJob of 1 024 ranks
// in seconds.
func (f *fixture) pods(tj *trainer.TrainJob, states []podState) {
	f.t.Helper()
	owners := map[string][]metav1.OwnerReference{}
	var g errgroup.Group
	g.SetLimit(16)
	for _, s := range states {
		if _, ok := owners[s.rj]; !ok {
			owners[s.rj] = f.controller(&batchv1.Job{}, tj.Name+"-"+s.rj+"-0")
		}
		p := f.newPod(tj, fmt.Sprintf("%s-%s-0-%d-x%02d", tj.Name, s.rj, s.rank, s.rank), owners[s.rj], s)
		g.Go(func() error {
			st := p.Status
			if err := f.c.Create(f.t.Context(), p); err != nil {
				return fmt.Errorf("create pod %s: %w", p.Name, err)
			}
			st.QOSClass = p.Status.QOSClass
			p.Status = st
			return f.c.Status().Update(f.t.Context(), p)
		})
	}
	if err := g.Wait(); err != nil {
		f.t.Fatal(err)
	}
}

// event records an Event about obj, first seen d after tj's creation, count times until last.
func (f *fixture) event(tj *trainer.TrainJob, obj client.Object, kind, typ, reason, message string, first, last time.Duration, count int32) {
	f.t.Helper()
	f.eventCount++
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", obj.GetName(), f.eventCount)},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: f.ns, Name: obj.GetName(), UID: obj.GetUID(),
			APIVersion: apiVersions[kind]},
		Type: typ, Reason: reason, Message: message, Count: count,
		FirstTimestamp: at(tj, first), LastTimestamp: at(tj, last),
		Source: corev1.EventSource{Component: "trainjob-controller"},
	}
	f.create(ev)
}

var apiVersions = map[string]string{trainer.TrainJobKind: trainer.GroupVersion.String(), "Pod": "v1",
	"JobSet": jobsetv1alpha2.GroupVersion.String(), "Job": "batch/v1"}

func (f *fixture) normalizer(tj *trainer.TrainJob) Normalizer {
	return Normalizer{Base: tj.CreationTimestamp.Time, Replace: map[string]string{f.ns: "<ns>"}}
}

// statusCmd is `status` with its clock pinned at now.
func statusCmd(now time.Time, terminal bool) plugin.CommandAdder {
	return func(f cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
		o := status.NewStatusOptions(s)
		o.Clock = clocktesting.NewFakePassiveClock(now)
		o.Terminal = &terminal
		return status.NewCmdStatusWithOptions(f, o)
	}
}

// kubeArgs are the global flags that point a command at the test cluster and namespace.
func kubeArgs(c *cluster.Cluster, ns string) []string {
	return []string{"--kubeconfig", c.KubeconfigPath, "-n", ns}
}

func withArgs(base []string, more ...string) []string {
	return append(append([]string{}, base...), more...)
}

// trainingTrainJob is a TrainJob whose initializers are done and whose two trainer nodes run.
func trainingTrainJob(f *fixture, name string) *trainer.TrainJob {
	tj := f.trainJob(name, 2, true)
	tj.Status = trainer.TrainJobStatus{
		Conditions: []metav1.Condition{condition(trainer.TrainJobComponentsCreated, trainer.TrainJobJobsCreatedReason, "JobSet llama was created", metav1.ConditionTrue, at(tj, 2*time.Second))},
		JobsStatus: []trainer.JobStatus{jobStatus("dataset-initializer", 0, 0, 1, 0), jobStatus("model-initializer", 0, 0, 1, 0), jobStatus("node", 1, 1, 0, 0)},
		TrainerStatus: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](45), EstimatedRemainingSeconds: ptr.To[int32](720),
			Metrics: []trainer.Metric{{Name: "loss", Value: "1.27"}, {Name: "tokens_per_sec", Value: "5100"}}, LastUpdatedTime: at(tj, 9*time.Minute)},
	}
	f.updateStatus(tj)
	f.jobSet(tj, "dataset-initializer", "model-initializer", "node")
	f.job(tj, "dataset-initializer", 1, jobTimes{start: 5 * time.Second, end: 40 * time.Second})
	f.job(tj, "model-initializer", 1, jobTimes{start: 5 * time.Second, end: time.Minute})
	f.job(tj, "node", 2, jobTimes{start: 62 * time.Second, end: -1})
	f.pod(tj, podState{rj: "dataset-initializer", node: "cpu-node-0", phase: corev1.PodSucceeded, started: 6 * time.Second, finished: 39 * time.Second})
	f.pod(tj, podState{rj: "model-initializer", node: "cpu-node-1", phase: corev1.PodSucceeded, started: 6 * time.Second, finished: 59 * time.Second})
	f.pod(tj, podState{rj: "node", rank: 0, node: "gpu-node-0", gpus: 8, phase: corev1.PodRunning, started: 63 * time.Second})
	f.pod(tj, podState{rj: "node", rank: 1, node: "gpu-node-1", gpus: 8, phase: corev1.PodRunning, started: 63 * time.Second, restarts: 1})
	// The controller's Event for the condition it set: one transition, shown once.
	f.event(tj, tj, trainer.TrainJobKind, corev1.EventTypeNormal, trainer.TrainJobJobsCreatedReason, "JobSet llama was created", 2*time.Second, 2*time.Second, 1)
	node1 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tj.Name + "-node-0-1-x01"}}
	f.event(tj, node1, "Pod", corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container node in pod "+node1.Name, 3*time.Minute, 4*time.Minute, 2)
	return tj
}

// TestStatus runs `status` against TrainJobs in every stage, as upstream's controllers leave them.
func TestStatus(t *testing.T) {
	c := sharedCluster(t)
	for _, tc := range []struct {
		name string
		test func(*testing.T, *cluster.Cluster)
	}{
		{"Training", testStatusTraining},
		{"JSONStages", testStatusJSONStages},
		{"Unschedulable", testStatusUnschedulable},
		{"Failed", testStatusFailed},
		{"NoJobSet", testStatusNoJobSet},
		{"WatchTerminal", testStatusWatchTerminal},
		{"WatchLive", testStatusWatchLive},
		{"WatchTerminalScreen", testStatusWatchScreen},
		{"WatchLiveScreen", testStatusWatchLiveScreen},
		{"Color", testStatusColor},
		{"Errors", testStatusErrors},
		{"ForeignPods", testForeignPods},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, c) })
	}
}

func testStatusTraining(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := trainingTrainJob(f, "llama")
	now := tj.CreationTimestamp.Add(10 * time.Minute)
	n := f.normalizer(tj)
	cmd := []plugin.CommandAdder{statusCmd(now, false)}
	for _, tc := range []struct{ name, golden string }{
		{"screen", "status/training"},
		{"json", "status/training-json"},
		{"yaml", "status/training-yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := withArgs(kubeArgs(c, f.ns), "status", "llama")
			if tc.name != "screen" {
				a = append(a, "-o", tc.name)
			}
			AssertGolden(t, tc.golden, n.Normalize(Run(t, "", cmd, a...).String()))
		})
	}
}

// testStatusJSONStages checks the contract other tools rely on: `status -o json` has stages with start,
// end and duration.
func testStatusJSONStages(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := f.trainJob("done", 1, true)
	tj.Status = trainer.TrainJobStatus{
		Conditions: []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully", metav1.ConditionTrue, at(tj, 5*time.Minute))},
		JobsStatus: []trainer.JobStatus{jobStatus("dataset-initializer", 0, 0, 1, 0), jobStatus("node", 0, 0, 1, 0)},
	}
	f.updateStatus(tj)
	f.jobSet(tj, "dataset-initializer", "node")
	f.job(tj, "dataset-initializer", 1, jobTimes{start: 3 * time.Second, end: 33 * time.Second})
	f.job(tj, "node", 1, jobTimes{start: 34 * time.Second, end: 5 * time.Minute})
	res := Run(t, "", []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(time.Hour), false)}, withArgs(kubeArgs(c, f.ns), "status", "done", "-o", "json")...)
	if res.Code != 0 {
		t.Fatal(res)
	}
	var s status.Summary
	if err := json.Unmarshal([]byte(res.Stdout), &s); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name       string
		start, end time.Duration
	}{{"Pending", 0, 3 * time.Second}, {"Initializing", 3 * time.Second, 33 * time.Second}, {"Training", 34 * time.Second, 5 * time.Minute}, {"Complete", 5 * time.Minute, 5 * time.Minute}}
	if len(s.Stages) != len(want) {
		t.Fatalf("stages = %+v, want %d", s.Stages, len(want))
	}
	for i, w := range want {
		got := s.Stages[i]
		if string(got.Name) != w.name || got.Start == nil || got.End == nil || !got.Start.Equal(ptr.To(at(tj, w.start))) || !got.End.Equal(ptr.To(at(tj, w.end))) {
			t.Errorf("stage %d = %s %v..%v, want %s +%v..+%v", i, got.Name, got.Start, got.End, w.name, w.start, w.end)
		}
		if d, err := time.ParseDuration(got.Duration); err != nil || d != w.end-w.start {
			t.Errorf("stage %s duration = %q, want %v", got.Name, got.Duration, w.end-w.start)
		}
	}
	if s.Stage != "Complete" {
		t.Errorf("stage = %s, want Complete", s.Stage)
	}
}

func testStatusUnschedulable(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := f.trainJob("big", 4, false)
	tj.Status = trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{jobStatus("node", 0, 1, 0, 0)}}
	f.updateStatus(tj)
	f.jobSet(tj, "node")
	f.job(tj, "node", 4, jobTimes{start: 2 * time.Second, end: -1})
	const msg = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
	for rank := range 4 {
		s := podState{rj: "node", rank: rank, gpus: 8, phase: corev1.PodPending, started: 3 * time.Second}
		if rank < 2 {
			s.node, s.waiting = fmt.Sprintf("gpu-node-%d", rank), "ContainerCreating"
		} else {
			s.unscheduled = msg
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("big-node-0-%d-x%02d", rank, rank)}}
			f.event(tj, pod, "Pod", corev1.EventTypeWarning, "FailedScheduling", msg, 3*time.Second, 90*time.Second, 4)
		}
		f.pod(tj, s)
	}
	res := Run(t, "", []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(2*time.Minute), false)}, withArgs(kubeArgs(c, f.ns), "status", "big")...)
	AssertGolden(t, "status/unschedulable", f.normalizer(tj).Normalize(res.String()))
}

// failedTrainJob was suspended, resumed, then failed when its trainer Job failed: its one pod was OOM-killed.
func failedTrainJob(f *fixture, name string) *trainer.TrainJob {
	tj := f.trainJob(name, 1, false, func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) })
	tj.Status = trainer.TrainJobStatus{
		Conditions: []metav1.Condition{
			condition(trainer.TrainJobSuspended, trainer.TrainJobResumedReason, trainer.TrainJobResumedMessage, metav1.ConditionFalse, at(tj, time.Minute)),
			condition(trainer.TrainJobFailed, "FailedJobs", "jobset failed due to one or more job failures", metav1.ConditionTrue, at(tj, 5*time.Minute)),
		},
		JobsStatus: []trainer.JobStatus{jobStatus("node", 0, 0, 0, 1)},
	}
	f.updateStatus(tj)
	f.jobSet(tj, "node")
	f.job(tj, "node", 1, jobTimes{start: 70 * time.Second, end: 5 * time.Minute, failed: true})
	f.pod(tj, podState{rj: "node", node: "gpu-node-2", gpus: 8, phase: corev1.PodFailed, started: 72 * time.Second, finished: 299 * time.Second,
		exitCode: 137, exitReason: "OOMKilled"})
	// The Suspended transition is only in an Event now: the condition moved on to Resumed.
	f.event(tj, tj, trainer.TrainJobKind, corev1.EventTypeNormal, trainer.TrainJobSuspendedReason, trainer.TrainJobSuspendedMessage, 1*time.Second, 1*time.Second, 1)
	f.event(tj, tj, trainer.TrainJobKind, corev1.EventTypeNormal, trainer.TrainJobResumedReason, trainer.TrainJobResumedMessage, time.Minute, time.Minute, 1)
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
	f.event(tj, js, "JobSet", corev1.EventTypeWarning, "FailedJobs", "jobset failed due to one or more job failures", 5*time.Minute, 5*time.Minute, 1)
	return tj
}

func testStatusFailed(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := failedTrainJob(f, "oom")
	res := Run(t, "", []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(time.Hour), false)}, withArgs(kubeArgs(c, f.ns), "status", "oom")...)
	AssertGolden(t, "status/failed", f.normalizer(tj).Normalize(res.String()))
}

// testStatusNoJobSet is a TrainJob upstream's controller could not build: only its Warning Event says why.
func testStatusNoJobSet(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := f.trainJob("broken", 1, false, func(tj *trainer.TrainJob) { tj.Spec.RuntimeRef.Name = "no-such-runtime" })
	f.event(tj, tj, trainer.TrainJobKind, corev1.EventTypeWarning, "TrainJobResourcesCreationFailed",
		`TrainJob resources reconciliation failed: clustertrainingruntimes.trainer.kubeflow.org "no-such-runtime" not found`, 1*time.Second, 40*time.Second, 5)
	res := Run(t, "", []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(time.Minute), false)}, withArgs(kubeArgs(c, f.ns), "status", "broken")...)
	AssertGolden(t, "status/no-jobset", f.normalizer(tj).Normalize(res.String()))
}

// testStatusWatchTerminal follows TrainJobs that are already terminal, off a terminal: the timeline so far,
// one line each, then the exit code of the outcome.
func testStatusWatchTerminal(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := failedTrainJob(f, "oom")
	res := Run(t, "", []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(time.Hour), false)}, withArgs(kubeArgs(c, f.ns), "status", "oom", "-w")...)
	AssertGolden(t, "status/watch-failed", f.normalizer(tj).Normalize(res.String()))
}

func testStatusErrors(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	cmd := []plugin.CommandAdder{statusCmd(time.Now(), false)}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"missing", withArgs(kubeArgs(c, f.ns), "status", "nope")},
		{"bad-output", withArgs(kubeArgs(c, f.ns), "status", "nope", "-o", "wide")},
		{"unknown-flag", withArgs(kubeArgs(c, f.ns), "status", "nope", "--bogus")},
		{"no-name", withArgs(kubeArgs(c, f.ns), "status")},
		{"missing-kubeconfig", []string{"--kubeconfig", "/nonexistent/kubeconfig", "status", "x"}},
		{"no-kubeconfig", []string{"status", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No kubeconfig anywhere: neither $KUBECONFIG nor ~/.kube/config, and not in a pod.
			t.Setenv("KUBECONFIG", "")
			t.Setenv("HOME", t.TempDir())
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			AssertGolden(t, "status/error-"+tc.name, f.normalizer(&trainer.TrainJob{}).Normalize(Run(t, "", cmd, tc.args...).String()))
		})
	}
}

// testStatusWatchLive follows a training TrainJob off a terminal until it completes: one line per transition
// and per progress report, each at its time, exit code 0.
func testStatusWatchLive(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := f.trainJob("live", 1, false)
	tj.Status = trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{jobStatus("node", 1, 1, 0, 0)}}
	f.updateStatus(tj)
	f.jobSet(tj, "node")
	f.job(tj, "node", 1, jobTimes{start: 10 * time.Second, end: -1})
	f.pod(tj, podState{rj: "node", node: "gpu-node-0", gpus: 8, phase: corev1.PodRunning, started: 11 * time.Second})
	run := Start(t, "", []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(time.Minute), false)}, withArgs(kubeArgs(c, f.ns), "status", "live", "-w")...)
	run.WaitForOutput(t, "Training")
	f.event(tj, tj, trainer.TrainJobKind, corev1.EventTypeWarning, "NodeLost", "rank 0 lost its node for 3s", 2*time.Minute, 2*time.Minute, 1)
	run.WaitForOutput(t, "NodeLost")
	tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](45), EstimatedRemainingSeconds: ptr.To[int32](720),
		Metrics: []trainer.Metric{{Name: "loss", Value: "1.27"}}, LastUpdatedTime: at(tj, 3*time.Minute)}
	f.updateStatus(tj)
	run.WaitForOutput(t, "45%")
	tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully", metav1.ConditionTrue, at(tj, 5*time.Minute))}
	tj.Status.JobsStatus = []trainer.JobStatus{jobStatus("node", 0, 0, 1, 0)}
	f.updateStatus(tj)
	AssertGolden(t, "status/watch-live", f.normalizer(tj).Normalize(run.Wait(t).String()))
}

// testStatusWatchScreen follows a finished TrainJob on a terminal: one frame, drawn in place.
func testStatusWatchScreen(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := failedTrainJob(f, "oom")
	res := Run(t, "", []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(time.Hour), true)}, withArgs(kubeArgs(c, f.ns), "status", "oom", "-w")...)
	AssertGolden(t, "status/watch-screen", f.normalizer(tj).Normalize(strings.ReplaceAll(res.String(), "\x1b", "<ESC>")))
}

func clientKey(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}

// testStatusColor colours the stage with --color=always, and only the stage: cells stay plain and aligned.
func testStatusColor(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := failedTrainJob(f, "oom")
	res := Run(t, "", []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(time.Hour), false)}, withArgs(kubeArgs(c, f.ns), "status", "oom", "--color=always")...)
	AssertGolden(t, "status/color", f.normalizer(tj).Normalize(strings.ReplaceAll(res.String(), "\x1b", "<ESC>")))
}

// testStatusWatchLiveScreen follows a training TrainJob on a terminal: a frame, drawn in place, for each change
// until it completes.
func testStatusWatchLiveScreen(t *testing.T, c *cluster.Cluster) {
	f := fixtureOn(t, c)
	tj := runningTrainJob(f, "live")
	run := Start(t, "", []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(time.Minute), true)}, withArgs(kubeArgs(c, f.ns), "status", "live", "-w")...)
	run.WaitForOutput(t, "Training")
	tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully", metav1.ConditionTrue, at(tj, 5*time.Minute))}
	tj.Status.JobsStatus = []trainer.JobStatus{jobStatus("node", 0, 0, 1, 0)}
	f.updateStatus(tj)
	res := run.Wait(t)
	frames := strings.Split(res.Stdout, printers.ClearScreen)
	if len(frames) < 3 || frames[0] != "" {
		t.Fatalf("want every frame to begin with %q and at least two frames; got:\n%s", printers.ClearScreen, res.Stdout)
	}
	// The first frame and the last one; how many frames lie between depends on how the watch events batch.
	res.Stdout = "<ESC>[H<ESC>[J" + frames[1] + "<ESC>[H<ESC>[J" + frames[len(frames)-1]
	AssertGolden(t, "status/watch-live-screen", f.normalizer(tj).Normalize(res.String()))
}
