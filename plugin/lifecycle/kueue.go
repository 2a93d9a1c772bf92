package lifecycle

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// workloadVersions are the Kueue API versions a Workload is read in, newest first: Kueue v0.15 and later serve
// v1beta2, older ones only v1beta1; spec.active means the same in both.
var workloadVersions = []schema.GroupVersionKind{
	{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"},
	{Group: "kueue.x-k8s.io", Version: "v1beta1", Kind: "WorkloadList"},
}

// workloadOf returns the Workload Kueue keeps for tj (the one tj controls), or nil when there is none: Kueue
// is not installed, or has not made it yet.
func workloadOf(ctx context.Context, c client.Client, tj *trainer.TrainJob) (*unstructured.Unstructured, error) {
	for _, gvk := range workloadVersions {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(gvk)
		if err := c.List(ctx, &list, client.InNamespace(tj.Namespace)); meta.IsNoMatchError(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		for i := range list.Items {
			if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == tj.UID {
				return &list.Items[i], nil
			}
		}
		return nil, nil
	}
	return nil, nil
}

// setWorkloadActive suspends or resumes a TrainJob queued by Kueue the way Kueue's own CLI (kueuectl
// stop/resume workload) does: through its Workload's spec.active. Kueue then evicts the Workload and suspends
// the TrainJob, or queues it again and resumes it once admitted; setting spec.suspend instead would be undone
// by Kueue.
func (o *SuspendOptions) setWorkloadActive(ctx context.Context, tj *trainer.TrainJob, wl *unstructured.Unstructured) error {
	verb := map[bool]string{true: "suspended", false: "resumed"}[o.Suspend]
	active := !o.Suspend
	ref := "workload.kueue.x-k8s.io/" + wl.GetName()
	if got, found, _ := unstructured.NestedBool(wl.Object, "spec", "active"); (found && got == active) || (!found && active) {
		fmt.Fprintf(o.Streams.Out, "trainjob.trainer.kubeflow.org/%s already %s (Kueue's %s has spec.active=%t)\n", tj.Name, verb, ref, active)
		return nil
	}
	patch := []byte(`{"spec":{"active":` + strconv.FormatBool(active) + `}}`)
	if err := o.Client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("%s of TrainJob %q: %w", ref, tj.Name, err)
	}
	how := "Kueue suspends it"
	if active {
		how = "it runs once Kueue admits it"
	}
	fmt.Fprintf(o.Streams.Out, "trainjob.trainer.kubeflow.org/%s %s through Kueue: %s spec.active=%t (%s)\n", tj.Name, verb, ref, active, how)
	return nil
}
