package install

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// UninstallOrder is the order --uninstall deletes objs in: the reverse of install's, CRDs last (and none
// with keepCRDs). The webhook configurations go first, so nothing calls the operator once it is gone.
func UninstallOrder(objs []*unstructured.Unstructured, keepCRDs bool) []*unstructured.Unstructured {
	var rest, crds []*unstructured.Unstructured
	for _, u := range slices.Backward(objs) {
		if isCRD(u) {
			crds = append(crds, u)
		} else {
			rest = append(rest, u)
		}
	}
	if keepCRDs {
		return rest
	}
	return append(rest, crds...)
}

// uninstall deletes what install applies, then waits until it is gone.
func (o *Options) uninstall(ctx context.Context) error {
	objs := UninstallOrder(o.Objects, o.KeepCRDs)
	if o.DryRun == "client" {
		for _, u := range objs {
			fmt.Fprintf(o.Streams.Out, "%s deleted%s\n", ref(u), o.dryRunSuffix())
		}
		return nil
	}
	if !o.KeepCRDs && !o.Yes && o.DryRun == "none" {
		if err := o.confirmCRDDeletion(ctx); err != nil {
			return err
		}
	}
	var dryRun []string
	if o.DryRun == "server" {
		dryRun = []string{metav1.DryRunAll}
	}
	background := metav1.DeletePropagationBackground
	var deleted []*unstructured.Unstructured
	absent := 0
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			foreign, err := o.foreignNamespace(ctx, u.GetName())
			if err != nil {
				return err
			}
			if foreign {
				o.progress("namespace/%s kept: install did not create it", u.GetName())
				continue
			}
		}
		res, err := o.clients.resource(u)
		if meta.IsNoMatchError(err) { // its CRD is gone, and it with it
			absent++
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", ref(u), err)
		}
		err = res.Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &background, DryRun: dryRun})
		if apierrors.IsNotFound(err) {
			absent++
			continue
		}
		if err != nil {
			return fmt.Errorf("delete %s: %w", ref(u), err)
		}
		fmt.Fprintf(o.Streams.Out, "%s deleted%s\n", ref(u), o.dryRunSuffix())
		deleted = append(deleted, u)
	}
	if absent > 0 {
		o.progress("%d of the operator's %d objects were not in the cluster", absent, len(objs))
	}
	if o.DryRun != "none" || !o.Wait || len(deleted) == 0 {
		return nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := o.waitGone(waitCtx, deleted); err != nil {
		return err
	}
	o.progress("The operator is uninstalled.")
	return nil
}

// waitGone waits until none of objs exists any more (a namespace takes the time its controller needs to
// empty it).
func (o *Options) waitGone(ctx context.Context, objs []*unstructured.Unstructured) error {
	left := slices.Clone(objs)
	return o.poll(ctx, fmt.Sprintf("%d objects to be gone", len(objs)), func(ctx context.Context) (bool, string) {
		var still []*unstructured.Unstructured
		var names []string
		for _, u := range left {
			res, err := o.clients.resource(u)
			if meta.IsNoMatchError(err) {
				continue
			}
			if err == nil {
				_, err = res.Get(ctx, u.GetName(), metav1.GetOptions{})
			}
			if apierrors.IsNotFound(err) {
				continue
			}
			still = append(still, u)
			names = append(names, ref(u))
		}
		left = still
		if len(left) == 0 {
			return true, ""
		}
		return false, fmt.Sprintf("%d left: %s", len(left), strings.Join(names, ", "))
	})
}

// confirmCRDDeletion asks before the CRDs go when TrainJobs or TrainingRuntimes exist: the API server
// deletes every object of a CRD with it, and the garbage collector then the TrainJobs' JobSets and pods.
func (o *Options) confirmCRDDeletion(ctx context.Context) error {
	jobs, jobNamespaces, err := o.count(ctx, trainJobGVR)
	if err != nil {
		return err
	}
	runtimes, _, err := o.count(ctx, trainJobGVR.GroupVersion().WithResource("trainingruntimes"))
	if err != nil {
		return err
	}
	if jobs == 0 && runtimes == 0 {
		return nil
	}
	var what []string
	if jobs > 0 {
		what = append(what, fmt.Sprintf("%s in %s (%s) with their JobSets and pods",
			plural(jobs, "TrainJob"), plural(len(jobNamespaces), "namespace"), strings.Join(jobNamespaces, ", ")))
	}
	if runtimes > 0 {
		what = append(what, plural(runtimes, "TrainingRuntime"))
	}
	lost := strings.Join(what, ", and ")
	if !o.StdinIsTerminal() {
		return fmt.Errorf("refusing to delete the CRDs without confirmation: that deletes %s, and standard input is not a terminal; pass --yes to delete them, or --keep-crds to keep the CRDs and all of it", lost)
	}
	fmt.Fprintf(o.Streams.Out, "Deleting the CRDs deletes %s.\nDelete them? [y/N]: ", lost)
	answer, err := bufio.NewReader(o.Streams.In).ReadString('\n')
	if err != nil && answer == "" {
		fmt.Fprintln(o.Streams.Out)
		return errors.New("no answer: nothing deleted")
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errors.New("nothing deleted (pass --keep-crds to remove the operator but keep the CRDs, TrainJobs and runtimes)")
}

// count is how many objects of gvr exist in the cluster, and in which namespaces (sorted). A resource the
// cluster does not serve has none.
func (o *Options) count(ctx context.Context, gvr schema.GroupVersionResource) (int, []string, error) {
	n := 0
	var namespaces []string
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := o.clients.metadata.Resource(gvr).List(ctx, opts)
		if apierrors.IsNotFound(err) {
			return 0, nil, nil
		}
		if err != nil {
			return 0, nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		for _, item := range list.Items {
			n++
			if !slices.Contains(namespaces, item.Namespace) {
				namespaces = append(namespaces, item.Namespace)
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	slices.Sort(namespaces)
	return n, namespaces, nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
