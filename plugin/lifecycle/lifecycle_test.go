package lifecycle

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue/kueuetest"
)

// notFoundHint ends the message of a TrainJob not found in namespace ns.
const notFoundHint = " (see `kubectl trainjob list -n ns`, or pass -n NAMESPACE)"

func trainJob(namespace, name string, labels map[string]string) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}}
}

// cluster holds TrainJobs a, b (team=x) and c in namespace ns, and d in namespace other.
func cluster(objs ...client.Object) client.WithWatch {
	objs = append(objs,
		trainJob("ns", "a", map[string]string{"team": "x"}),
		trainJob("ns", "b", map[string]string{"team": "x"}),
		trainJob("ns", "c", nil),
		trainJob("other", "d", map[string]string{"team": "x"}),
	)
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(&trainer.TrainJob{}).Build()
}

func TestDeleteValidate(t *testing.T) {
	tests := []struct {
		name    string
		o       DeleteOptions
		wantErr string
	}{
		{"names", DeleteOptions{Names: []string{"a"}}, ""},
		{"--all", DeleteOptions{All: true}, ""},
		{"-l", DeleteOptions{LabelSelector: "team=x"}, ""},
		{"nothing chosen", DeleteOptions{}, "name the TrainJobs to delete, or pass --all or -l SELECTOR"},
		{"names and --all", DeleteOptions{Names: []string{"a"}, All: true}, "choose the TrainJobs one way: names, --all or -l SELECTOR"},
		{"--all and -l", DeleteOptions{All: true, LabelSelector: "team=x"}, "choose the TrainJobs one way: names, --all or -l SELECTOR"},
		{"negative timeout", DeleteOptions{All: true, Timeout: -time.Second}, "--timeout must not be negative, not -1s"},
		{"bad selector", DeleteOptions{LabelSelector: "team in"}, `invalid label selector "team in": `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := tt.o.Validate(); err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && got != "" || !strings.HasPrefix(got, tt.wantErr) {
				t.Errorf("Validate() = %q, want %q", got, tt.wantErr)
			}
		})
	}
}

// TestDeleteTargets: which TrainJobs delete chooses: the names given (once each, in order; a missing one is
// an error unless --ignore-not-found), every one of the namespace (--all), or those a selector matches.
func TestDeleteTargets(t *testing.T) {
	tests := []struct {
		name    string
		o       DeleteOptions
		want    []string
		wantErr []string
	}{
		{name: "names, in order, once each", o: DeleteOptions{Names: []string{"c", "a", "c"}}, want: []string{"c", "a"}},
		{name: "a missing name", o: DeleteOptions{Names: []string{"a", "gone"}}, want: []string{"a"},
			wantErr: []string{`trainjobs.trainer.kubeflow.org "gone" not found in namespace "ns"` + notFoundHint}},
		{name: "a missing name ignored", o: DeleteOptions{Names: []string{"gone", "b"}, IgnoreNotFound: true}, want: []string{"b"}},
		{name: "the name of another namespace's TrainJob", o: DeleteOptions{Names: []string{"d"}},
			wantErr: []string{`trainjobs.trainer.kubeflow.org "d" not found in namespace "ns"` + notFoundHint}},
		{name: "--all: the namespace's only", o: DeleteOptions{All: true}, want: []string{"a", "b", "c"}},
		{name: "-l: the namespace's that match", o: DeleteOptions{LabelSelector: "team=x"}, want: []string{"a", "b"}},
		{name: "-l matching none", o: DeleteOptions{LabelSelector: "team=y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Namespace, tt.o.Client = "ns", cluster()
			targets, errs := tt.o.targets(context.Background())
			var names, messages []string
			for _, tj := range targets {
				names = append(names, tj.Name)
			}
			for _, err := range errs {
				messages = append(messages, err.Error())
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErr, messages); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeleteConfirm: the prompt lists what goes, and only y or yes deletes; without a terminal it refuses.
func TestDeleteConfirm(t *testing.T) {
	listing := "These TrainJobs in namespace \"ns\" will be deleted with what they own (--cascade=background):\n" +
		"  trainjob/a (Pending): nothing yet\n" +
		"  trainjob/c (Pending): nothing yet\n" +
		"Delete 2 TrainJobs? [y/N]: "
	tests := []struct {
		name     string
		terminal bool
		answer   string
		want     bool
		out      string
		wantErr  string
	}{
		{name: "y", terminal: true, answer: "y\n", want: true, out: listing},
		{name: "YES", terminal: true, answer: " YES \n", want: true, out: listing},
		{name: "n", terminal: true, answer: "n\n", out: listing + "Nothing deleted.\n"},
		{name: "enter", terminal: true, answer: "\n", out: listing + "Nothing deleted.\n"},
		{name: "end of input", terminal: true, answer: "", out: listing + "\n", wantErr: "no answer: nothing deleted"},
		{name: "not a terminal", answer: "y\n",
			wantErr: "refusing to delete 2 TrainJobs without confirmation: standard input is not a terminal; pass -y to delete without asking"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &bytes.Buffer{}
			o := NewDeleteOptions(genericiooptions.IOStreams{In: strings.NewReader(tt.answer), Out: out, ErrOut: &bytes.Buffer{}})
			o.StdinIsTerminal = func() bool { return tt.terminal }
			o.Namespace, o.Client = "ns", cluster()
			got, err := o.confirm(context.Background(), []trainer.TrainJob{*trainJob("ns", "a", nil), *trainJob("ns", "c", nil)}, nil)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tt.want || gotErr != tt.wantErr {
				t.Errorf("confirm = %v, %q; want %v, %q", got, gotErr, tt.want, tt.wantErr)
			}
			if diff := cmp.Diff(tt.out, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSuspendPatch: suspend and resume set spec.suspend unless it is already so, refuse a finished
// TrainJob, and note Kueue's queue.
func TestSuspendPatch(t *testing.T) {
	finished := trainJob("ns", "finished", nil)
	finished.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted",
		LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}}
	paused := trainJob("ns", "paused", nil)
	paused.Spec.Suspend = ptr.To(true)
	queued := trainJob("ns", "queued", map[string]string{kueue.QueueLabel: "gpu-queue"})
	tests := []struct {
		name        string
		suspend     bool
		target      string
		wantSuspend bool
		out, errOut string
		wantErr     string
	}{
		{name: "suspend", suspend: true, target: "a", wantSuspend: true, out: "trainjob.trainer.kubeflow.org/a suspended\n"},
		{name: "suspend a suspended one", suspend: true, target: "paused", wantSuspend: true, out: "trainjob.trainer.kubeflow.org/paused already suspended\n"},
		{name: "resume", target: "paused", out: "trainjob.trainer.kubeflow.org/paused resumed\n"},
		{name: "resume a running one", target: "a", out: "trainjob.trainer.kubeflow.org/a already resumed\n"},
		{name: "suspend a queued one", suspend: true, target: "queued", wantSuspend: true, out: "trainjob.trainer.kubeflow.org/queued suspended\n",
			errOut: "note: queued is queued by Kueue (kueue.x-k8s.io/queue-name=gpu-queue), which decides when it runs and may change spec.suspend again\n"},
		{name: "suspend a finished one", suspend: true, target: "finished",
			wantErr: `trainjobs.trainer.kubeflow.org "finished" is Complete: a finished TrainJob cannot be suspended`},
		{name: "a missing one", suspend: true, target: "gone",
			wantErr: `trainjobs.trainer.kubeflow.org "gone" not found in namespace "ns"` + notFoundHint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
			c := cluster(finished, paused, queued)
			o := &SuspendOptions{Streams: genericiooptions.IOStreams{Out: out, ErrOut: errOut}, Suspend: tt.suspend, Namespace: "ns", Client: c}
			gotErr := ""
			if err := o.patch(context.Background(), tt.target); err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("patch = %q, want %q", gotErr, tt.wantErr)
			}
			if diff := cmp.Diff([]string{tt.out, tt.errOut}, []string{out.String(), errOut.String()}); diff != "" {
				t.Errorf("stdout, stderr (-want +got):\n%s", diff)
			}
			if tt.wantErr != "" {
				return
			}
			got := &trainer.TrainJob{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: tt.target}, got); err != nil {
				t.Fatal(err)
			}
			if s := ptr.Deref(got.Spec.Suspend, false); s != tt.wantSuspend {
				t.Errorf("spec.suspend = %v, want %v", s, tt.wantSuspend)
			}
		})
	}
}

// TestSuspendThroughWorkload: a TrainJob queued by Kueue is suspended and resumed through its Workload's
// spec.active, which Kueue acts on; its spec.suspend, Kueue's, is left alone.
func TestSuspendThroughWorkload(t *testing.T) {
	queued := trainJob("ns", "queued", map[string]string{kueue.QueueLabel: "gpu"})
	queued.UID = "uid-queued"
	tests := []struct {
		name    string
		suspend bool
		active  *bool
		patch   string
		out     string
	}{
		{name: "suspend", suspend: true, patch: `{"spec":{"active":false}}`,
			out: "trainjob.trainer.kubeflow.org/queued suspended through Kueue: workload.kueue.x-k8s.io/trainjob-queued-1a2b3 spec.active=false (Kueue suspends it)\n"},
		{name: "resume", active: ptr.To(false), patch: `{"spec":{"active":true}}`,
			out: "trainjob.trainer.kubeflow.org/queued resumed through Kueue: workload.kueue.x-k8s.io/trainjob-queued-1a2b3 spec.active=true (it runs once Kueue admits it)\n"},
		{name: "resume an active one", active: ptr.To(true),
			out: "trainjob.trainer.kubeflow.org/queued already resumed (Kueue's workload.kueue.x-k8s.io/trainjob-queued-1a2b3 has spec.active=true)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "trainjob-queued-1a2b3",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob", Name: "queued",
					UID: queued.UID, Controller: ptr.To(true)}}}}
			wl.Spec.Active = tt.active
			api := &kueuetest.API{Versions: []string{"v1beta2", "v1beta1"}, Workloads: []kueue.Workload{wl}}
			c := cluster(queued)
			out := &bytes.Buffer{}
			o := &SuspendOptions{Streams: genericiooptions.IOStreams{Out: out, ErrOut: &bytes.Buffer{}}, Suspend: tt.suspend, Namespace: "ns",
				Client: c, Kueue: api.Client()}
			if err := o.patch(context.Background(), "queued"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.out, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			// Kueue's group, the namespace's Workloads, and the patch if any.
			want := []string{"GET /apis/kueue.x-k8s.io", "GET /apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads"}
			if tt.patch != "" {
				want = append(want, "PATCH /apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/trainjob-queued-1a2b3 "+tt.patch)
			}
			if diff := cmp.Diff(want, api.Requests()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			tj := &trainer.TrainJob{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(queued), tj); err != nil {
				t.Fatal(err)
			}
			if tj.Spec.Suspend != nil {
				t.Errorf("spec.suspend changed to %v; it is Kueue's", *tj.Spec.Suspend)
			}
		})
	}
}
