package install

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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
	found, err := o.survey(ctx)
	if err != nil {
		return err
	}
	if !o.KeepCRDs && !o.Yes && o.DryRun == "none" {
		if err := o.confirmCRDDeletion(found); err != nil {
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
		opts := metav1.DeleteOptions{PropagationPolicy: &background, DryRun: dryRun}
		if o.KeepCRDs && isClusterRuntime(u) {
			if by, changed := found.changedShipped[u.GetName()]; changed {
				fmt.Fprintf(o.Streams.Out, "%s kept: changed in this cluster (by %s)\n", ref(u), strings.Join(by, ", "))
				continue
			}
			// Only as it was read: a change made since keeps it too.
			if rv, ok := found.unchangedShipped[u.GetName()]; ok {
				opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
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
		err = res.Delete(ctx, u.GetName(), opts)
		if apierrors.IsNotFound(err) {
			absent++
			continue
		}
		if apierrors.IsConflict(err) && opts.Preconditions != nil {
			fmt.Fprintf(o.Streams.Out, "%s kept: changed in this cluster while uninstalling\n", ref(u))
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

// userData is what lives in the operator's CRDs that install did not put there as it is, and goes with the
// CRDs: every TrainJob, OptimizationJob and TrainingRuntime, and each ClusterTrainingRuntime created in the
// cluster or changed there since install applied it.
type userData struct {
	trainJobs        int
	trainJobsIn      map[string][]string // namespace → names, sorted
	optimizationJobs []string            // namespace/name, sorted
	trainingRuntimes []string            // namespace/name, sorted
	clusterRuntimes  []string            // name (what it is), sorted
	// changedShipped are the shipped ClusterTrainingRuntimes that another field manager than install's
	// changed, with those managers; unchangedShipped the others, with the resourceVersion read.
	changedShipped   map[string][]string
	unchangedShipped map[string]string
}

func (d *userData) empty() bool {
	return d.trainJobs == 0 && len(d.optimizationJobs) == 0 && len(d.trainingRuntimes) == 0 && len(d.clusterRuntimes) == 0
}

// summary counts what d holds: "3 TrainJobs, 1 OptimizationJob, 1 TrainingRuntime and 2 ClusterTrainingRuntimes".
func (d *userData) summary() string {
	var parts []string
	for _, p := range []struct {
		n    int
		noun string
	}{{d.trainJobs, "TrainJob"}, {len(d.optimizationJobs), "OptimizationJob"}, {len(d.trainingRuntimes), "TrainingRuntime"},
		{len(d.clusterRuntimes), "ClusterTrainingRuntime"}} {
		if p.n > 0 {
			parts = append(parts, plural(p.n, p.noun))
		}
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// list writes every object d holds, by kind.
func (d *userData) list(w io.Writer) {
	if d.trainJobs > 0 {
		namespaces := slices.Sorted(maps.Keys(d.trainJobsIn))
		fmt.Fprintf(w, "  %s in %s (their JobSets and pods go with them):\n", plural(d.trainJobs, "TrainJob"), plural(len(namespaces), "namespace"))
		for _, ns := range namespaces {
			fmt.Fprintf(w, "    %s: %s\n", ns, strings.Join(d.trainJobsIn[ns], ", "))
		}
	}
	if n := len(d.optimizationJobs); n > 0 {
		fmt.Fprintf(w, "  %s (their trials go with them):\n", plural(n, "OptimizationJob"))
		for _, r := range d.optimizationJobs {
			fmt.Fprintf(w, "    %s\n", r)
		}
	}
	if n := len(d.trainingRuntimes); n > 0 {
		fmt.Fprintf(w, "  %s:\n", plural(n, "TrainingRuntime"))
		for _, r := range d.trainingRuntimes {
			fmt.Fprintf(w, "    %s\n", r)
		}
	}
	if n := len(d.clusterRuntimes); n > 0 {
		fmt.Fprintf(w, "  %s created or changed in this cluster:\n", plural(n, "ClusterTrainingRuntime"))
		for _, r := range d.clusterRuntimes {
			fmt.Fprintf(w, "    %s\n", r)
		}
	}
}

// survey reads what the CRDs hold (metadata only). A resource the cluster does not serve holds nothing.
func (o *Options) survey(ctx context.Context) (*userData, error) {
	d := &userData{trainJobsIn: map[string][]string{}, changedShipped: map[string][]string{}, unchangedShipped: map[string]string{}}
	err := o.each(ctx, trainJobGVR, func(item *metav1.PartialObjectMetadata) {
		d.trainJobs++
		d.trainJobsIn[item.Namespace] = append(d.trainJobsIn[item.Namespace], item.Name)
	})
	if err != nil {
		return nil, err
	}
	err = o.each(ctx, trainJobGVR.GroupVersion().WithResource("optimizationjobs"), func(item *metav1.PartialObjectMetadata) {
		d.optimizationJobs = append(d.optimizationJobs, item.Namespace+"/"+item.Name)
	})
	if err != nil {
		return nil, err
	}
	err = o.each(ctx, trainJobGVR.GroupVersion().WithResource("trainingruntimes"), func(item *metav1.PartialObjectMetadata) {
		d.trainingRuntimes = append(d.trainingRuntimes, item.Namespace+"/"+item.Name)
	})
	if err != nil {
		return nil, err
	}
	shipped := map[string]bool{}
	for _, u := range o.Objects {
		if isClusterRuntime(u) {
			shipped[u.GetName()] = true
		}
	}
	err = o.each(ctx, trainJobGVR.GroupVersion().WithResource("clustertrainingruntimes"), func(item *metav1.PartialObjectMetadata) {
		if !shipped[item.Name] {
			d.clusterRuntimes = append(d.clusterRuntimes, item.Name+" (created here)")
			return
		}
		by := changedBy(item.ManagedFields)
		if len(by) == 0 {
			d.unchangedShipped[item.Name] = item.ResourceVersion
			return
		}
		d.changedShipped[item.Name] = by
		d.clusterRuntimes = append(d.clusterRuntimes, fmt.Sprintf("%s (shipped, changed by %s)", item.Name, strings.Join(by, ", ")))
	})
	if err != nil {
		return nil, err
	}
	for _, names := range d.trainJobsIn {
		slices.Sort(names)
	}
	slices.Sort(d.optimizationJobs)
	slices.Sort(d.trainingRuntimes)
	slices.Sort(d.clusterRuntimes)
	return d, nil
}

// changedBy are the field managers other than install's that own a field of an object install applied —
// someone changed it (kubectl edit, label, apply) — sorted. Taking the legacy finalizer off a runtime, as the
// operator does, is no change.
func changedBy(entries []metav1.ManagedFieldsEntry) []string {
	var by []string
	for _, e := range entries {
		if e.Manager == FieldManager || slices.Contains(by, e.Manager) || onlyFinalizers(e.FieldsV1) {
			continue
		}
		by = append(by, e.Manager)
	}
	slices.Sort(by)
	return by
}

// onlyFinalizers tells whether a managed fields set holds nothing but metadata.finalizers.
func onlyFinalizers(f *metav1.FieldsV1) bool {
	if f == nil {
		return true
	}
	var set map[string]any
	if err := json.Unmarshal(f.Raw, &set); err != nil {
		return false
	}
	metadata, _ := set["f:metadata"].(map[string]any)
	delete(metadata, "f:finalizers")
	if len(metadata) == 0 {
		delete(set, "f:metadata")
	}
	return len(set) == 0
}

func isClusterRuntime(u *unstructured.Unstructured) bool {
	return u.GetKind() == "ClusterTrainingRuntime" && u.GroupVersionKind().Group == trainJobGVR.Group
}

// confirmCRDDeletion lists what the CRDs hold and asks before they go: the API server deletes every object of
// a CRD with it, and the garbage collector then the TrainJobs' JobSets and pods.
func (o *Options) confirmCRDDeletion(found *userData) error {
	if found.empty() {
		return nil
	}
	fmt.Fprintln(o.Streams.Out, "Deleting the CRDs deletes:")
	found.list(o.Streams.Out)
	if !o.StdinIsTerminal() {
		return fmt.Errorf("refusing to delete the CRDs without confirmation: that deletes %s, and standard input is not a terminal; pass --yes to delete them, or --keep-crds to keep the CRDs and all of it", found.summary())
	}
	fmt.Fprint(o.Streams.Out, "Delete the CRDs and all of the above? [y/N]: ")
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

// each calls f with every object of gvr in the cluster (metadata only). A resource the cluster does not
// serve has none.
func (o *Options) each(ctx context.Context, gvr schema.GroupVersionResource, f func(*metav1.PartialObjectMetadata)) error {
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := o.clients.metadata.Resource(gvr).List(ctx, opts)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		for i := range list.Items {
			f(&list.Items[i])
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
