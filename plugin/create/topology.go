package create

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// parseTopology splits --topology LEVEL[:required|:preferred] into the level and the annotation Kueue reads for
// that kind of request. A node label has no ':', so the last one separates the kind.
func parseTopology(value string) (level, annotation string, err error) {
	level, kind := value, "required"
	if i := strings.LastIndex(value, ":"); i >= 0 {
		level, kind = value[:i], value[i+1:]
	}
	if level == "" {
		return "", "", fmt.Errorf("invalid --topology %q: name a level, e.g. --topology rack or --topology rack:preferred", value)
	}
	switch kind {
	case "required":
		return level, kueue.PodSetRequiredTopologyAnnotation, nil
	case "preferred":
		return level, kueue.PodSetPreferredTopologyAnnotation, nil
	}
	return "", "", fmt.Errorf("invalid --topology %q: %q is neither required nor preferred; write LEVEL, LEVEL:required or LEVEL:preferred, e.g. --topology rack:preferred", value, kind)
}

// placeByTopology asks Kueue to place the trainer's pods within one domain of the level --topology names: the
// level is looked up in the cluster's Kueue Topologies, and its node label set as Kueue's annotation on the
// trainer's pod templates (create's runtime patch), where Kueue's TrainJob integration reads it when it makes
// the Workload. A user who may not list Topologies may give the node label itself.
func (o *CreateOptions) placeByTopology(ctx context.Context, tj *trainer.TrainJob, rt *pipeline.Runtime) error {
	level, annotation, err := parseTopology(o.spec.topology)
	if err != nil {
		return err
	}
	served, err := o.kueue.Served(ctx)
	if err != nil {
		return err
	}
	if !served {
		return fmt.Errorf("--topology %s asks Kueue to place the pods, and Kueue is not installed: the API server does not serve %s", o.spec.topology, kueue.Group)
	}
	label := level
	topologies, err := o.kueue.Topologies(ctx)
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(level, "/"):
		fmt.Fprintf(o.ErrOut, "warning: you may not list Kueue's Topologies, so whether %s is a level of one is not checked\n", level)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("invalid --topology %q: you may not list Kueue's Topologies to find the level %s: give its node label, e.g. --topology cloud.provider.com/topology-rack", o.spec.topology, level)
	case err != nil:
		return fmt.Errorf("read Kueue's Topologies: %w", err)
	default:
		if label, err = kueue.ResolveLevel(topologies, level); err != nil {
			return fmt.Errorf("invalid --topology %q: %w", o.spec.topology, err)
		}
	}
	patchTrainerPods(tj, rt, func(p *trainer.PodTemplatePatch) {
		if p.Metadata == nil {
			p.Metadata = &metav1.ObjectMeta{}
		}
		p.Metadata.Annotations = merged(p.Metadata.Annotations, map[string]string{annotation: label})
	})
	return nil
}
