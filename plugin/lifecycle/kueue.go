package lifecycle

import (
	"context"
	"fmt"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// setWorkloadActive suspends or resumes a TrainJob queued by Kueue the way Kueue's own CLI (kueuectl
// stop/resume workload) does: through its Workload's spec.active. Kueue then evicts the Workload and suspends
// the TrainJob, or queues it again and resumes it once admitted; setting spec.suspend instead would be undone
// by Kueue.
func (o *SuspendOptions) setWorkloadActive(ctx context.Context, tj *trainer.TrainJob, wl *kueue.Workload) error {
	verb := map[bool]string{true: "suspended", false: "resumed"}[o.Suspend]
	active := !o.Suspend
	ref := kueue.WorkloadResource + "/" + wl.Name
	if wl.Active() == active {
		fmt.Fprintf(o.Streams.Out, "trainjob.trainer.kubeflow.org/%s already %s (Kueue's %s has spec.active=%t)\n", tj.Name, verb, ref, active)
		return nil
	}
	if err := o.Kueue.SetActive(ctx, wl, active); err != nil {
		return fmt.Errorf("%s of TrainJob %q: %w", ref, tj.Name, err)
	}
	how := "Kueue suspends it"
	if active {
		how = "it runs once Kueue admits it"
	}
	fmt.Fprintf(o.Streams.Out, "trainjob.trainer.kubeflow.org/%s %s through Kueue: %s spec.active=%t (%s)\n", tj.Name, verb, ref, active, how)
	return nil
}
