package create

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/dryrun"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/fit"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

// createManager owns the runtime patch of --gpu-type and --topology. The webhook wants a domain-prefixed path.
const createManager = "kubectl-trainjob.trainer.kubeflow.org/create"

// selectGPUType puts the trainer's pods on nodes of one GPU model: a nodeSelector of the GPU feature discovery
// label (nodeSelector is among the fields a runtime patch may still change while suspended, as Kueue does).
func selectGPUType(tj *trainer.TrainJob, rt *pipeline.Runtime, product string) {
	patchTrainerPods(tj, rt, func(p *trainer.PodTemplatePatch) {
		if p.Spec == nil {
			p.Spec = &trainer.PodSpecPatch{}
		}
		p.Spec.NodeSelector = map[string]string{completion.GPUProductLabel: product}
	})
}

// patchTrainerPods changes the trainer's pod templates through create's runtime patch (the way Kubeflow
// Trainer v2.3 lets a TrainJob change its runtime's pod templates): change is applied to the pod template patch
// of every replicated job of the runtime that is the trainer's step, `node` when the runtime could not be
// read. The patch is one per manager (spec.runtimePatches is a map keyed by manager), shared by the flags.
func patchTrainerPods(tj *trainer.TrainJob, rt *pipeline.Runtime, change func(*trainer.PodTemplatePatch)) {
	var jobs []string
	if rt != nil {
		for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
			if rj.Template.Labels[trainer.AncestorLabel] == trainer.AncestorTrainer {
				jobs = append(jobs, rj.Name)
			}
		}
	}
	if len(jobs) == 0 {
		jobs = []string{trainer.Node}
	}
	i := slices.IndexFunc(tj.Spec.RuntimePatches, func(p trainer.RuntimePatch) bool { return p.Manager == createManager })
	if i < 0 {
		tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, trainer.RuntimePatch{Manager: createManager})
		i = len(tj.Spec.RuntimePatches) - 1
	}
	patch := &tj.Spec.RuntimePatches[i]
	if patch.TrainingRuntimeSpec == nil {
		patch.TrainingRuntimeSpec = &trainer.TrainingRuntimeSpecPatch{}
	}
	if patch.TrainingRuntimeSpec.Template == nil {
		patch.TrainingRuntimeSpec.Template = &trainer.JobSetTemplatePatch{}
	}
	if patch.TrainingRuntimeSpec.Template.Spec == nil {
		patch.TrainingRuntimeSpec.Template.Spec = &trainer.JobSetSpecPatch{}
	}
	spec := patch.TrainingRuntimeSpec.Template.Spec
	for _, name := range jobs {
		k := slices.IndexFunc(spec.ReplicatedJobs, func(rj trainer.ReplicatedJobPatch) bool { return rj.Name == name })
		if k < 0 {
			spec.ReplicatedJobs = append(spec.ReplicatedJobs, trainer.ReplicatedJobPatch{Name: name})
			k = len(spec.ReplicatedJobs) - 1
		}
		rj := &spec.ReplicatedJobs[k]
		if rj.Template == nil {
			rj.Template = &trainer.JobTemplatePatch{}
		}
		if rj.Template.Spec == nil {
			rj.Template.Spec = &trainer.JobSpecPatch{}
		}
		if rj.Template.Spec.Template == nil {
			rj.Template.Spec.Template = &trainer.PodTemplatePatch{}
		}
		change(rj.Template.Spec.Template)
	}
}

// warnIfNowhere warns, before the TrainJob is sent, when its pods fit nowhere, even on the cluster's nodes
// emptied of other pods; the TrainJob is sent all the same, as the cluster may grow. Only the nodes are read
// (what other pods use does not matter here). It says nothing when that cannot be told: no runtime, nodes the
// user may not list, a cluster without nodes (one that makes them on demand), a TrainJob the API server's
// schema or the pipeline refuses (the API server or the operator says why). tmpl is the ResourceClaimTemplate
// --gpu-claim makes (nil: none), not created yet.
func (o *CreateOptions) warnIfNowhere(ctx context.Context, tj *trainer.TrainJob, rt *pipeline.Runtime, tmpl *resourcev1.ResourceClaimTemplate) {
	if rt == nil {
		return
	}
	schema, err := dryrun.NewSchema()
	if err != nil {
		return
	}
	admitted, err := (&dryrun.Loader{Schema: schema, Namespace: tj.Namespace}).AdmitTrainJob(ctx, tj)
	if err != nil {
		return
	}
	f, err := o.computeFit(ctx, admitted, rt, tmpl, fit.ReadOptions{})
	if err != nil || f.Nodes == 0 || f.Verdict != fit.Nowhere {
		return
	}
	fmt.Fprintf(o.ErrOut, "warning: %s\n", printers.Escape(f.Message))
	_ = f.WriteBlocked(o.ErrOut)
	then := ": its pods wait for nodes that can take them"
	if o.Wait || o.Follow {
		then = ", and waiting as asked: it cannot start before nodes that can take its pods join (--timeout bounds the wait)"
	}
	name := tj.Name
	if name == "" {
		name = "NAME"
	}
	fmt.Fprintf(o.ErrOut, "warning: creating it anyway, as the cluster may grow%s; see what they need with: kubectl trainjob fit %s\n", then, name)
}

// printFit ends a server dry run with what fits now of the TrainJob the API server accepted (tj, with its
// defaults): on standard output after the created line, or on standard error when -o asks for a document,
// so that the document stays whole.
func (o *CreateOptions) printFit(ctx context.Context, tj *trainer.TrainJob, rt *pipeline.Runtime, tmpl *resourcev1.ResourceClaimTemplate) error {
	out := o.Out
	if ptr.Deref(o.PrintFlags.OutputFormat, "") != "" {
		out = o.ErrOut
	}
	if rt == nil {
		_, err := fmt.Fprintln(out, "\nWhether it fits is not checked: its runtime could not be read.")
		return err
	}
	f, err := o.computeFit(ctx, tj, rt, tmpl, fit.ReadOptions{Pods: true})
	if err != nil {
		return notChecked(out, err)
	}
	if _, err := fmt.Fprintln(out); err != nil {
		return err
	}
	return f.WriteText(out)
}

func notChecked(out io.Writer, err error) error {
	_, werr := fmt.Fprintf(out, "\nWhether it fits is not checked: %s.\n", printers.Escape(err.Error()))
	return werr
}

// computeFit builds the admitted TrainJob's pods with the binary's pipeline, reads the cluster as opts say and
// places them there. The pods' DRA claims are read from the cluster, but tmpl's (nil: none): that
// ResourceClaimTemplate is not created yet, or only in a dry run.
func (o *CreateOptions) computeFit(ctx context.Context, tj *trainer.TrainJob, rt *pipeline.Runtime, tmpl *resourcev1.ResourceClaimTemplate, opts fit.ReadOptions) (*fit.Fit, error) {
	fw, err := o.Pipeline.Framework(ctx, &dryrun.Inputs{})
	if err != nil {
		return nil, err
	}
	sets, _, err := fit.PodSets(ctx, fw, tj, []*pipeline.Runtime{rt})
	if err != nil {
		return nil, err
	}
	cl, err := fit.ReadFor(ctx, withTemplate{Reader: o.client, tmpl: tmpl}, sets, opts)
	if err != nil {
		return nil, err
	}
	return fit.Compute(tj.Namespace, cmp.Or(tj.Name, tj.GenerateName), sets, cl), nil
}

// withTemplate reads the ResourceClaimTemplate tmpl (nil: none) as it is, and anything else with the Reader.
type withTemplate struct {
	client.Reader
	tmpl *resourcev1.ResourceClaimTemplate
}

func (r withTemplate) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if t, ok := obj.(*resourcev1.ResourceClaimTemplate); ok && r.tmpl != nil && client.ObjectKeyFromObject(r.tmpl) == key {
		r.tmpl.DeepCopyInto(t)
		return nil
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}
