package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// dispatchedObjects are the objects of TrainJob tj, which MultiKueue dispatched to worker-1 and which is
// Training there (its status is the copy's), as Fetch gathers them: w is what was read of the worker.
func dispatchedObjects(w *WorkerObjects, pods ...corev1.Pod) Objects {
	tj := withJobs(trainJob(cond(trainer.TrainJobSuspended, "Resumed", metav1.ConditionFalse, 4*time.Second)), counts("node", 1, 1, 0))
	tj.Labels = map[string]string{kueue.QueueLabel: "gpu"}
	tj.Spec.ManagedBy = ptr.To(trainer.MultiKueueController)
	wl := workload(wlCond(kueue.ConditionAdmitted, "Admitted", metav1.ConditionTrue, "The workload is admitted", 3*time.Second))
	wl.Status.ClusterName = ptr.To("worker-1")
	return Objects{TrainJob: tj, Queue: &QueueObjects{Served: true, Workload: wl, LocalQueue: lq()}, Worker: w, Pods: pods}
}

func workerObjects(reached bool, remote *trainer.TrainJob) *WorkerObjects {
	w := &kueue.Worker{Cluster: "worker-1", Secret: "kueue-system/worker-1-kubeconfig"}
	if reached {
		w.Config = &rest.Config{Host: "https://10.0.0.7:6443"}
	} else {
		w.Unreachable = "you may not read its kubeconfig Secret kueue-system/worker-1-kubeconfig"
	}
	return &WorkerObjects{Worker: w, TrainJob: remote}
}

// TestWorker: where a dispatched TrainJob runs, on the screen and in the summary: the worker's pods and their
// troubles stand in the stage line as a local TrainJob's do; a worker that cannot be read says why and how to
// see it.
func TestWorker(t *testing.T) {
	remote := trainJob()
	remote.UID = "uid-remote"
	running := func(name string) corev1.Pod {
		return pod(name, "node", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
	}
	pullBackOff := pod("tj-node-0-1-bbbbb", "node", func(p *corev1.Pod) {
		p.Spec.NodeName = "gpu-node-1"
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
	})
	complete := dispatchedObjects(workerObjects(true, nil))
	complete.TrainJob.Status.Conditions = append(complete.TrainJob.Status.Conditions,
		cond(trainer.TrainJobComplete, "JobSetCompleted", metav1.ConditionTrue, time.Minute))

	for _, tc := range []struct {
		name   string
		in     Objects
		worker *Worker
		line   string // the Worker line
		stage  string
	}{{
		name:   "read through the Secret: the worker's pods",
		in:     dispatchedObjects(workerObjects(true, remote), running("tj-node-0-0-aaaaa"), running("tj-node-0-1-bbbbb")),
		worker: &Worker{Cluster: "worker-1", Secret: "kueue-system/worker-1-kubeconfig", Read: true},
		line:   "worker-1 (MultiKueue cluster; read through Secret kueue-system/worker-1-kubeconfig)",
		stage:  "Training: running node (2/2 pods running)",
	}, {
		name:   "a worker's pod that cannot pull its image",
		in:     dispatchedObjects(workerObjects(true, remote), running("tj-node-0-0-aaaaa"), pullBackOff),
		worker: &Worker{Cluster: "worker-1", Secret: "kueue-system/worker-1-kubeconfig", Read: true},
		line:   "worker-1 (MultiKueue cluster; read through Secret kueue-system/worker-1-kubeconfig)",
		stage:  "Training: pod tj-node-0-1-bbbbb: ImagePullBackOff: Back-off pulling image",
	}, {
		name: "the Secret forbidden: where it runs, and how to see it",
		in:   dispatchedObjects(workerObjects(false, nil)),
		worker: &Worker{Cluster: "worker-1", Secret: "kueue-system/worker-1-kubeconfig",
			Note: "you may not read its kubeconfig Secret kueue-system/worker-1-kubeconfig; to see its pods, run `kubectl trainjob status tj -n ns` with --kubeconfig or --context of cluster worker-1"},
		line:  "worker-1 (MultiKueue cluster): you may not read its kubeconfig Secret kueue-system/worker-1-kubeconfig; to see its pods, run `kubectl trainjob status tj -n ns` with --kubeconfig or --context of cluster worker-1",
		stage: "Training: running node",
	}, {
		name: "the worker refuses MultiKueue's credentials",
		in: func() Objects {
			in := dispatchedObjects(workerObjects(true, nil))
			in.Worker.Unreadable = "pods is forbidden"
			return in
		}(),
		worker: &Worker{Cluster: "worker-1", Secret: "kueue-system/worker-1-kubeconfig", Note: "cannot read it through Secret kueue-system/worker-1-kubeconfig: pods is forbidden"},
		line:   "worker-1 (MultiKueue cluster): cannot read it through Secret kueue-system/worker-1-kubeconfig: pods is forbidden",
		stage:  "Training: running node",
	}, {
		name:   "the copy not created yet",
		in:     dispatchedObjects(workerObjects(true, nil)),
		worker: &Worker{Cluster: "worker-1", Secret: "kueue-system/worker-1-kubeconfig", Note: "MultiKueue has not created the TrainJob's copy there yet"},
		line:   "worker-1 (MultiKueue cluster): MultiKueue has not created the TrainJob's copy there yet",
		stage:  "Training: running node",
	}, {
		name: "finished: MultiKueue deleted the copy",
		in:   complete,
		worker: &Worker{Cluster: "worker-1", Secret: "kueue-system/worker-1-kubeconfig",
			Note: "MultiKueue deleted the TrainJob's copy there, with its pods and their logs, once it finished"},
		line:  "worker-1 (MultiKueue cluster): MultiKueue deleted the TrainJob's copy there, with its pods and their logs, once it finished",
		stage: "Complete: JobSetCompleted: JobSetCompleted message",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.in, created.Add(time.Hour))
			if diff := cmp.Diff(tc.worker, s.Worker); diff != "" {
				t.Errorf("Worker (-want +got):\n%s", diff)
			}
			if got := s.StageLine(); got != tc.stage {
				t.Errorf("StageLine() = %q, want %q", got, tc.stage)
			}
			var b bytes.Buffer
			if err := Render(&b, s, created.Add(time.Hour), false); err != nil {
				t.Fatal(err)
			}
			if want := "\nWorker:      " + tc.line + "\n"; !strings.Contains(b.String(), want) {
				t.Errorf("the screen lacks %q:\n%s", want, b.String())
			}
		})
	}
	if s := Summarize(Objects{TrainJob: trainJob()}, created); s.Worker != nil {
		t.Errorf("a TrainJob that runs here has a worker: %+v", s.Worker)
	}
}

// TestWorkerEvents: the Events of the worker's copy of the TrainJob are the TrainJob's, in its timeline.
func TestWorkerEvents(t *testing.T) {
	remote := trainJob()
	remote.UID = "uid-remote"
	copyEvent := event(corev1.EventTypeNormal, "JobSetCreated", 5*time.Second)
	copyEvent.InvolvedObject.UID = remote.UID
	podEvent := corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "tj-node-0-0-aaaaa", UID: "uid-pod"}}
	got := asManagers([]corev1.Event{copyEvent, podEvent}, remote, trainJob())
	if got[0].InvolvedObject.UID != "uid-1" || got[1].InvolvedObject.UID != "uid-pod" {
		t.Errorf("asManagers: UIDs %s, %s; want the TrainJob's for its copy's Event, the pod's kept", got[0].InvolvedObject.UID, got[1].InvolvedObject.UID)
	}
	if copyEvent.InvolvedObject.UID != remote.UID {
		t.Errorf("asManagers changed the Event it was given")
	}
	in := dispatchedObjects(workerObjects(true, remote))
	in.Events = got
	found := false
	for _, e := range Summarize(in, created.Add(time.Hour)).Timeline {
		found = found || (e.Source == SourceEvent && e.Reason == "JobSetCreated")
	}
	if !found {
		t.Errorf("the timeline lacks the copy's Event")
	}
}
