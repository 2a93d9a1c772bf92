package list

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/gpuhealth"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// sickGPUWarnings are, for -o wide, the warnings about the TrainJobs of items that run on a node whose GPUs
// are sick (plugin/gpuhealth), one a TrainJob and node: "TrainJob default/llama runs on gpu-node-1, whose GPUs
// are sick: …". They take three requests, and only when some TrainJob is running: the pods of those TrainJobs
// bound to a node (one list, by their JobSets' label), the nodes and the DRA devices. What the user may not read
// leaves nothing to say.
func (o *ListOptions) sickGPUWarnings(ctx context.Context, items []trainer.TrainJob) []string {
	running := map[string]bool{}
	var names []string
	for i := range items {
		if st := stage.Of(&items[i]); st == stage.Initializing || st == stage.Training {
			running[items[i].Namespace+"/"+items[i].Name] = true
			names = append(names, items[i].Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	req, err := labels.NewRequirement(jobsetv1alpha2.JobSetNameKey, selection.In, names)
	if err != nil {
		return nil
	}
	var pods corev1.PodList
	if err := o.Client.List(ctx, &pods, client.InNamespace(o.Namespace), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)},
		client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("spec.nodeName", "")}); err != nil {
		return nil
	}
	onNodes := map[string][]string{} // TrainJob → its nodes
	for _, p := range pods.Items {
		tj := p.Namespace + "/" + p.Labels[jobsetv1alpha2.JobSetNameKey]
		if running[tj] && !slices.Contains(onNodes[tj], p.Spec.NodeName) {
			onNodes[tj] = append(onNodes[tj], p.Spec.NodeName)
		}
	}
	if len(onNodes) == 0 {
		return nil
	}
	var nodes corev1.NodeList
	if err := o.Client.List(ctx, &nodes); err != nil {
		return nil
	}
	devices, err := gpuhealth.ReadDevices(ctx, o.Client, "")
	if err != nil {
		return nil
	}
	sick := map[string]*gpuhealth.Sickness{}
	for i := range nodes.Items {
		if s := gpuhealth.Of(&nodes.Items[i], devices); s != nil {
			sick[s.Node] = s
		}
	}
	var warnings []string
	for tj, on := range onNodes {
		for _, n := range on {
			if s := sick[n]; s != nil {
				warnings = append(warnings, fmt.Sprintf("TrainJob %s runs on %s, whose GPUs are sick: %s", tj, n, strings.Join(s.Signs, "; ")))
			}
		}
	}
	slices.Sort(warnings)
	return warnings
}

// warnSickGPUs writes the warnings of sickGPUWarnings to stderr, as kubectl writes the API server's.
func (o *ListOptions) warnSickGPUs(ctx context.Context, items []trainer.TrainJob) {
	for _, w := range o.sickGPUWarnings(ctx, items) {
		fmt.Fprintf(o.Streams.ErrOut, "Warning: %s\n", printers.Escape(w))
	}
}
