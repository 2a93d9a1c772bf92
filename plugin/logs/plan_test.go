package logs

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
)

func jobSet(rjobs ...jobsetv1alpha2.ReplicatedJob) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: rjobs}}
}

func rjob(name string, pods int32) jobsetv1alpha2.ReplicatedJob {
	return jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Parallelism: ptr.To(pods), Completions: ptr.To(pods),
	}}}
}

var (
	torch     = jobSet(rjob("node", 4))
	torchtune = jobSet(rjob("dataset-initializer", 1), rjob("model-initializer", 1), rjob("node", 2))
	mpi       = jobSet(rjob("launcher", 1), rjob("node", 3))
	// withSidecar's pods have an init container and the trainer's: two logs each.
	withSidecar = func() *jobsetv1alpha2.JobSet {
		rj := rjob("node", 4)
		rj.Template.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "fetch-credentials"}}
		rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node"}}
		return jobSet(rj)
	}()
)

func TestNewPlan(t *testing.T) {
	type want struct {
		steps   string // step:rank:container, …
		streams int
	}
	tests := []struct {
		name string
		sel  selection
		js   *jobsetv1alpha2.JobSet
		want want
		err  string
	}{
		{name: "default is rank 0 of the trainer", sel: selection{rank: 0}, js: torch, want: want{"trainer:0:node", 1}},
		{name: "without follow the initializers are left out", sel: selection{rank: 0}, js: torchtune, want: want{"trainer:0:node", 1}},
		{name: "follow reads the pipeline", sel: selection{rank: 0, follow: true}, js: torchtune,
			want: want{"dataset-initializer:all:dataset-initializer,model-initializer:all:model-initializer,trainer:0:node", 3}},
		{name: "follow with every rank", sel: selection{rank: allRanks, follow: true}, js: torchtune,
			want: want{"dataset-initializer:all:dataset-initializer,model-initializer:all:model-initializer,trainer:all:node", 4}},
		{name: "-c applies to the trainer only in the pipeline", sel: selection{rank: 0, follow: true, container: "sidecar"}, js: torchtune,
			want: want{"dataset-initializer:all:dataset-initializer,model-initializer:all:model-initializer,trainer:0:sidecar", 3}},
		{name: "MPI defaults to the launcher", sel: selection{rank: 0}, js: mpi, want: want{"launcher:0:node", 1}},
		{name: "MPI nodes by --stage trainer", sel: selection{stage: "trainer", rank: allRanks}, js: mpi, want: want{"trainer:all:node", 3}},
		{name: "an initializer by --stage", sel: selection{stage: "model-initializer", rank: 0}, js: torchtune, want: want{"model-initializer:0:model-initializer", 1}},
		{name: "a stage the JobSet lacks", sel: selection{stage: "dataset-initializer", rank: 0}, js: torch,
			err: "TrainJob tj has no dataset-initializer stage (replicated job \"dataset-initializer\"); its stages are: trainer"},
		{name: "rank out of range", sel: selection{rank: 4}, js: torch,
			err: "rank 4 out of range: the trainer stage of TrainJob tj has 4 rank(s), 0 to 3"},
		{name: "--all-containers reads each container of each pod", sel: selection{rank: allRanks, allContainers: true}, js: withSidecar,
			want: want{"trainer:all:node", 8}},
		{name: "--all-containers of one rank", sel: selection{rank: 1, allContainers: true}, js: withSidecar, want: want{"trainer:1:node", 2}},
		{name: "no trainer", sel: selection{rank: 0}, js: jobSet(rjob("dataset-initializer", 1)),
			err: "TrainJob tj has no trainer stage (replicated job \"node\" or \"launcher\"); its stages are: dataset-initializer; choose one with --stage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPlan(tc.sel, "tj", tc.js)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var steps []string
			for _, s := range p.steps {
				r := "all"
				if s.rank != allRanks {
					r = strconv.Itoa(s.rank)
				}
				steps = append(steps, s.name+":"+r+":"+s.container)
			}
			n, _ := p.streams()
			if diff := cmp.Diff(tc.want, want{strings.Join(steps, ","), n}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func pod(name, rjob string, index int, node string, created time.Time, restartAttempt int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey:        "tj",
			jobsetv1alpha2.ReplicatedJobNameKey: rjob,
			jobsetv1alpha2.JobIndexKey:          "0",
			cmdutil.RestartAttemptLabel:         strconv.Itoa(restartAttempt),
		}},
		Spec: corev1.PodSpec{NodeName: node},
	}
	// Older Job controllers set only the annotation.
	if index%2 == 0 {
		p.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(index)
	} else {
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(index)}
	}
	return p
}

func TestPlanMatchAndLatest(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pods := []*corev1.Pod{
		pod("tj-node-0-1-old", "node", 1, "gpu-node-1", t0, 0),
		pod("tj-node-0-0-a", "node", 0, "gpu-node-0", t0, 0),
		pod("tj-node-0-1-new", "node", 1, "gpu-node-2", t0.Add(time.Second), 0),
		pod("tj-node-0-2-x", "node", 2, "gpu-node-2", t0, 1),
		pod("tj-node-0-2-y", "node", 2, "gpu-node-3", t0.Add(time.Minute), 0), // older restart attempt, newer pod
		pod("tj-dataset-initializer-0-0-z", "dataset-initializer", 0, "cpu-node-0", t0, 0),
	}
	tests := []struct {
		name string
		sel  selection
		want []string
	}{
		{name: "rank 0", sel: selection{rank: 0}, want: []string{"tj-node-0-0-a"}},
		{name: "every rank, newest pod of each", sel: selection{rank: allRanks}, want: []string{"tj-node-0-0-a", "tj-node-0-1-new", "tj-node-0-2-x"}},
		{name: "a rank whose completion index is an annotation", sel: selection{rank: 1}, want: []string{"tj-node-0-1-new"}},
		{name: "pods on one node", sel: selection{rank: allRanks, node: "gpu-node-2"}, want: []string{"tj-node-0-1-new", "tj-node-0-2-x"}},
		{name: "the pipeline in order", sel: selection{rank: 0, follow: true}, want: []string{"tj-dataset-initializer-0-0-z", "tj-node-0-0-a"}},
	}
	js := jobSet(rjob("dataset-initializer", 1), rjob("node", 3))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPlan(tc.sel, "tj", js)
			if err != nil {
				t.Fatal(err)
			}
			var targets []podTarget
			for _, pd := range pods {
				if tg, ok := p.match(pd); ok {
					targets = append(targets, tg)
				}
			}
			var got []string
			for _, tg := range latest(targets) {
				got = append(got, tg.pod.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContainerOf(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer"}}}}
	if got, err := containerOf(p, "node", false); err != nil || got != "trainer" {
		t.Errorf("default container of a one-container pod = %q, %v; want trainer", got, err)
	}
	if _, err := containerOf(p, "node", true); err == nil || err.Error() != `pod p has no container "node"; choose one of [trainer] with -c` {
		t.Errorf("explicit missing container: error %v", err)
	}
}
