package cli

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/wait"
)

// completeTrainJob is a TrainJob whose JobSet completed.
func completeTrainJob(f *fixture, name string) *trainer.TrainJob {
	tj := f.trainJob(name, 1, false)
	tj.Status = trainer.TrainJobStatus{
		Conditions: []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully", metav1.ConditionTrue, at(tj, 3*time.Minute))},
		JobsStatus: []trainer.JobStatus{jobStatus("node", 0, 0, 1, 0)},
	}
	f.updateStatus(tj)
	return tj
}

// runningTrainJob is a TrainJob whose trainer runs.
func runningTrainJob(f *fixture, name string) *trainer.TrainJob {
	tj := f.trainJob(name, 1, false)
	tj.Status = trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{jobStatus("node", 1, 1, 0, 0)}}
	f.updateStatus(tj)
	return tj
}

// TestWait waits for stages and conditions, and checks each exit code: 0 reached, 2 Failed instead,
// 3 timed out, 1 error.
func TestWait(t *testing.T) {
	c := sharedCluster(t)
	f := fixtureOn(t, c)
	done := completeTrainJob(f, "done")
	failedTrainJob(f, "oom")
	runningTrainJob(f, "running")
	n := f.normalizer(done)
	cmd := []plugin.CommandAdder{wait.NewCmdWait}
	kube := kubeArgs(c, f.ns)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"complete", withArgs(kube, "wait", "done", "--for=Complete")},
		{"stage-any-case", withArgs(kube, "wait", "done", "--for=complete")},
		{"failed-instead", withArgs(kube, "wait", "oom", "--for=Complete")},
		{"either-end", withArgs(kube, "wait", "oom", "--for=Complete", "--for=Failed")},
		{"either-end-comma", withArgs(kube, "wait", "oom", "--for=Complete,Failed")},
		{"several", withArgs(kube, "wait", "done", "oom", "--for=Complete")},
		{"condition", withArgs(kube, "wait", "oom", "--for=condition=Suspended=False")},
		{"training", withArgs(kube, "wait", "running", "--for=Training")},
		{"timeout", withArgs(kube, "wait", "running", "--for=Complete", "--timeout=1s")},
		{"unreachable", withArgs(kube, "wait", "done", "--for=Training")},
		{"delete-gone", withArgs(kube, "wait", "nope", "--for=delete")},
		{"error-missing", withArgs(kube, "wait", "nope", "--for=Complete")},
		{"error-no-for", withArgs(kube, "wait", "done")},
		{"error-bad-for", withArgs(kube, "wait", "done", "--for=Running!")},
		{"error-bad-status", withArgs(kube, "wait", "done", "--for=condition=Complete=Yes")},
		{"error-negative-timeout", withArgs(kube, "wait", "done", "--for=Complete", "--timeout=-1s")},
		{"error-unknown-flag", withArgs(kube, "wait", "done", "--for=Complete", "--until=1h")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			AssertGolden(t, "wait/"+tc.name, n.Normalize(Run(t, "", cmd, tc.args...).String()))
		})
	}

	// Each TrainJob changes while a wait runs.
	for _, tc := range []struct {
		name, forWhat string
		change        func(*trainer.TrainJob)
	}{
		{"becomes-complete", "Complete", func(tj *trainer.TrainJob) {
			tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully", metav1.ConditionTrue, at(tj, time.Minute))}
			f.updateStatus(tj)
		}},
		{"becomes-failed", "Complete", func(tj *trainer.TrainJob) {
			tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobFailed, trainer.TrainJobDeadlineExceededReason, trainer.TrainJobDeadlineExceededMessage, metav1.ConditionTrue, at(tj, time.Minute))}
			f.updateStatus(tj)
		}},
		{"deleted", "delete", func(tj *trainer.TrainJob) {
			if err := f.c.Delete(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted-while-waiting", "Complete", func(tj *trainer.TrainJob) {
			if err := f.c.Delete(t.Context(), tj); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := runningTrainJob(f, tc.name)
			// The wait's client tells when the command has read the TrainJob: only then may it change (a
			// TrainJob gone before the first read is "not found", not "deleted while waiting").
			read := make(chan struct{})
			var once sync.Once
			watching, err := client.NewWithWatch(c.Config, client.Options{Scheme: scheme.New()})
			if err != nil {
				t.Fatal(err)
			}
			readSignalling := interceptor.NewClient(watching, interceptor.Funcs{
				Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					err := cl.Get(ctx, key, obj, opts...)
					if key.Name == tc.name {
						once.Do(func() { close(read) })
					}
					return err
				},
			})
			waitCmd := func(fa cmdutil.Factory, s cmdutil.Streams) *cobra.Command {
				o := wait.NewWaitOptions(s)
				o.Client = readSignalling
				return wait.NewCmdWaitWithOptions(fa, o)
			}
			run := Start(t, "", []plugin.CommandAdder{waitCmd}, withArgs(kube, "wait", tc.name, "--for="+tc.forWhat, "--timeout=2m")...)
			select {
			case <-read:
			case <-time.After(time.Minute):
				t.Fatal("wait did not read the TrainJob within a minute")
			}
			tc.change(tj)
			AssertGolden(t, "wait/"+tc.name, n.Normalize(run.Wait(t).String()))
		})
	}
}
