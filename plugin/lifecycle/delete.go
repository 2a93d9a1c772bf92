package lifecycle

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/optimizationjob"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

const deleteExample = `  # List what llama-ft owns, ask, then delete it and wait until it is gone (its children go in the background)
  kubectl trainjob delete llama-ft

  # Delete every TrainJob labelled team=nlp, whatever its stage, without asking
  kubectl trainjob delete -l team=nlp -y

  # Delete llama-ft's JobSet, Jobs and pods first and the TrainJob last, and wait until all are gone
  kubectl trainjob delete llama-ft -y --cascade=foreground

  # Delete a hyperparameter search (kubectl trainjob optimize) and its trials
  kubectl trainjob delete optimizationjob/sweep`

const (
	// retryInterval is how soon --wait reads a TrainJob again after a read failed.
	retryInterval = 250 * time.Millisecond
	// rereadInterval is how often --wait reads a TrainJob that did not change.
	rereadInterval = 2 * time.Second
)

// maxTransientErrors is how many reads in a row --wait lets fail with an error that may pass (a timeout, an
// overloaded or restarting API server) before it gives up; any other error ends it at once.
const maxTransientErrors = 5

// DeleteOptions are the flags and resolved inputs of `delete`.
type DeleteOptions struct {
	Streams cmdutil.Streams

	Names []string
	// OptimizationJobs are the names of the arguments optimizationjob/NAME.
	OptimizationJobs []string
	All              bool
	LabelSelector    string
	Yes              bool
	IgnoreNotFound   bool
	Cascade          string
	Wait             bool
	Timeout          time.Duration

	// StdinIsTerminal tells whether the prompt can be answered; tests set it.
	StdinIsTerminal func() bool
	Namespace       string
	Client          client.WithWatch
	// UID, with one name, is the UID of the TrainJob whose listing the user confirmed elsewhere (the
	// dashboard's dialog): one deleted and created again under that name since is not deleted.
	UID types.UID
}

var _ cmdutil.Command = (*DeleteOptions)(nil)

// NewDeleteOptions returns options reading the answer from streams.In.
func NewDeleteOptions(streams cmdutil.Streams) *DeleteOptions {
	return &DeleteOptions{
		Streams:         streams,
		Cascade:         "background",
		Wait:            true,
		StdinIsTerminal: func() bool { return printers.IsTerminal(streams.In) },
	}
}

// NewCmdDelete is `kubectl trainjob delete`.
func NewCmdDelete(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdDeleteWithOptions(f, NewDeleteOptions(streams))
}

// NewCmdDeleteWithOptions is `kubectl trainjob delete` with preset options (a terminal in tests).
func NewCmdDeleteWithOptions(f cmdutil.Factory, o *DeleteOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete (NAME... | optimizationjob/NAME... | --all | -l SELECTOR)",
		Short: "Delete TrainJobs and everything they own",
		Long: `Delete TrainJobs. Unless -y is given, it first lists what each one owns (its JobSet, Jobs and
pods, and the ConfigMaps, Secrets and PodGroups the controller made for it) and asks. Without a
terminal to ask on, it refuses unless -y is given.

--cascade=background (the default, as in kubectl) deletes the TrainJob at once and leaves its
children to the garbage collector; foreground deletes the children first and the TrainJob last,
so --wait returns once the pods are gone; orphan leaves the children.

optimizationjob/NAME deletes an OptimizationJob (kubectl trainjob optimize) and, through their
controller reference, its trials: the prompt lists them (the TrainJobs it controls) with their
stage, and they go as a TrainJob's children go. --all and -l choose TrainJobs only. Deleting a
trial alone leaves its OptimizationJob counting it: the prompt says so.`,
		Example:           deleteExample,
		ValidArgsFunction: completion.TrainJobOrOptimizationJobNames(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	cmd.Flags().BoolVar(&o.All, "all", o.All, "Delete every TrainJob of the namespace.")
	cmd.Flags().StringVarP(&o.LabelSelector, "selector", "l", o.LabelSelector, "Delete the TrainJobs with these labels.")
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", o.Yes, "Do not ask for confirmation.")
	cmd.Flags().BoolVar(&o.IgnoreNotFound, "ignore-not-found", o.IgnoreNotFound, "Treat a TrainJob that does not exist as deleted.")
	cmd.Flags().StringVar(&o.Cascade, "cascade", o.Cascade, "How children are deleted: background, foreground or orphan.")
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "Wait until the TrainJobs are gone (with --cascade=foreground: their children too).")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "With --wait, give up after this long (exit code 3); 0 waits as long as it takes.")
	_ = cmd.RegisterFlagCompletionFunc("cascade", cobra.FixedCompletions([]string{"background", "foreground", "orphan"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete resolves the namespace, the client and the propagation policy.
func (o *DeleteOptions) Complete(f cmdutil.Factory, _ *cobra.Command, args []string) error {
	o.Names, o.OptimizationJobs = nil, nil
	for _, arg := range args {
		if name, ok := optimizationjob.NameOf(arg); ok {
			o.OptimizationJobs = append(o.OptimizationJobs, name)
		} else {
			o.Names = append(o.Names, arg)
		}
	}
	if _, err := propagationOf(o.Cascade); err != nil {
		return err
	}
	var err error
	o.Namespace, o.Client, err = cmdutil.NamespaceAndClient(f, o.Client)
	return err
}

// propagationOf is the propagation policy of --cascade.
func propagationOf(cascade string) (metav1.DeletionPropagation, error) {
	switch cascade {
	case "background", "true":
		return metav1.DeletePropagationBackground, nil
	case "foreground":
		return metav1.DeletePropagationForeground, nil
	case "orphan", "false":
		return metav1.DeletePropagationOrphan, nil
	}
	return "", fmt.Errorf("invalid --cascade %q: use background, foreground or orphan", cascade)
}

// Validate requires exactly one way of choosing the TrainJobs.
func (o *DeleteOptions) Validate() error {
	ways := 0
	for _, given := range []bool{len(o.Names)+len(o.OptimizationJobs) > 0, o.All, o.LabelSelector != ""} {
		if given {
			ways++
		}
	}
	switch {
	case ways == 0:
		return errors.New("name the TrainJobs to delete, or pass --all or -l SELECTOR")
	case ways > 1:
		return errors.New("choose the TrainJobs one way: names, --all or -l SELECTOR")
	case o.Timeout < 0:
		return fmt.Errorf("--timeout must not be negative, not %s", o.Timeout)
	}
	if _, err := labels.Parse(o.LabelSelector); err != nil {
		return fmt.Errorf("invalid label selector %q: %w", o.LabelSelector, err)
	}
	return nil
}

// Run finds the TrainJobs, asks, deletes them and waits until they are gone.
func (o *DeleteOptions) Run(ctx context.Context) error {
	targets, errs := o.targets(ctx)
	if o.UID != "" {
		for i := range targets {
			targets[i].UID = o.UID // deleted only if it is still the one confirmed
		}
	}
	searches, searchErrs := o.optimizationTargets(ctx)
	errs = append(errs, searchErrs...)
	if len(targets)+len(searches) == 0 {
		if len(errs) == 0 && len(o.Names)+len(o.OptimizationJobs) == 0 {
			fmt.Fprintf(o.Streams.ErrOut, "No resources found in %s namespace.\n", o.Namespace)
		}
		return errors.Join(errs...)
	}
	if !o.Yes {
		ok, err := o.confirm(ctx, targets, searches)
		if err != nil || !ok {
			return errors.Join(append(errs, err)...)
		}
	}
	var deleted []client.Object
	for i := range targets {
		if err := o.delete(ctx, &targets[i], cmdutil.Resource); err != nil {
			errs = append(errs, err)
		} else {
			deleted = append(deleted, &targets[i])
		}
	}
	for i := range searches {
		if err := o.delete(ctx, &searches[i], optimizationjob.Resource); err != nil {
			errs = append(errs, err)
		} else {
			deleted = append(deleted, &searches[i])
		}
	}
	if o.Wait && len(deleted) > 0 {
		if err := o.waitGone(ctx, deleted); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// delete deletes obj, of resource, as it was listed (and confirmed): one created since under the same name has
// another UID. Gone already with --ignore-not-found is deleted.
func (o *DeleteOptions) delete(ctx context.Context, obj client.Object, resource string) error {
	uid := obj.GetUID()
	propagation, err := propagationOf(o.Cascade)
	if err != nil {
		return err
	}
	err = o.Client.Delete(ctx, obj, client.PropagationPolicy(propagation), client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err) && o.IgnoreNotFound:
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s %q not deleted: it was deleted and created again since it was listed (listed uid %s); run the command again to delete the new one",
			resource, obj.GetName(), uid)
	case err != nil && resource == cmdutil.Resource:
		return cmdutil.DescribeError(err, o.Namespace, obj.GetName())
	case err != nil:
		return err
	}
	fmt.Fprintf(o.Streams.Out, "%s %q deleted\n", resource, obj.GetName())
	return nil
}

// optimizationTargets are the OptimizationJobs named optimizationjob/NAME.
func (o *DeleteOptions) optimizationTargets(ctx context.Context) ([]trainer.OptimizationJob, []error) {
	var out []trainer.OptimizationJob
	var errs []error
	for _, name := range o.OptimizationJobs {
		oj := trainer.OptimizationJob{}
		err := o.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, &oj)
		switch {
		case err == nil:
			if !slices.ContainsFunc(out, func(t trainer.OptimizationJob) bool { return t.Name == name }) {
				out = append(out, oj)
			}
		case o.IgnoreNotFound && apierrors.IsNotFound(err):
		case apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("%s %q not found in namespace %q (see `kubectl trainjob list --optimizations -n %s`, or pass -n NAMESPACE)",
				optimizationjob.Resource, name, o.Namespace, o.Namespace))
		default:
			errs = append(errs, err)
		}
	}
	return out, errs
}

// targets are the TrainJobs named, or selected by --all or -l.
func (o *DeleteOptions) targets(ctx context.Context) ([]trainer.TrainJob, []error) {
	if len(o.Names) == 0 {
		if !o.All && o.LabelSelector == "" {
			return nil, nil // only OptimizationJobs were named
		}
		l := &trainer.TrainJobList{}
		sel, _ := labels.Parse(o.LabelSelector)
		if err := o.Client.List(ctx, l, client.InNamespace(o.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, []error{cmdutil.DescribeError(err, o.Namespace, "")}
		}
		return l.Items, nil
	}
	var out []trainer.TrainJob
	var errs []error
	for _, name := range o.Names {
		tj, err := cmdutil.GetTrainJob(ctx, o.Client, o.Namespace, name)
		switch {
		case err == nil:
			if !slices.ContainsFunc(out, func(t trainer.TrainJob) bool { return t.Name == name }) {
				out = append(out, *tj)
			}
		case o.IgnoreNotFound && apierrors.IsNotFound(err):
		case apierrors.IsNotFound(err) && o.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, &trainer.OptimizationJob{}) == nil:
			// Deleting a search takes its trials: only when asked for by its kind, never by a name that missed.
			errs = append(errs, fmt.Errorf("%s %q not found in namespace %q, but an OptimizationJob of that name is: delete it and its trials with `kubectl trainjob delete %s%s`",
				cmdutil.Resource, name, o.Namespace, optimizationjob.Prefix, name))
		default:
			errs = append(errs, err)
		}
	}
	return out, errs
}

// confirm lists what will go and asks on the terminal.
func (o *DeleteOptions) confirm(ctx context.Context, targets []trainer.TrainJob, searches []trainer.OptimizationJob) (bool, error) {
	var whats []string
	if n := len(targets); n > 0 {
		whats = append(whats, fmt.Sprintf("%d TrainJob%s", n, map[bool]string{true: "", false: "s"}[n == 1]))
	}
	if n := len(searches); n > 0 {
		whats = append(whats, fmt.Sprintf("%d OptimizationJob%s", n, map[bool]string{true: "", false: "s"}[n == 1]))
	}
	what := strings.Join(whats, " and ")
	if !o.StdinIsTerminal() {
		return false, fmt.Errorf("refusing to delete %s without confirmation: standard input is not a terminal; pass -y to delete without asking", what)
	}
	if len(searches) > 0 {
		if err := o.confirmSearches(ctx, searches); err != nil {
			return false, err
		}
	}
	if len(targets) == 0 {
		return o.ask(what)
	}
	o.list(ctx, o.Streams.Out, targets)
	return o.ask(what)
}

// Listing is what delete lists before it asks, for the TrainJobs it is given (names, --all or -l): each with its
// stage and what it owns; and the TrainJobs listed, whose UIDs a later delete can require (UID).
func (o *DeleteOptions) Listing(ctx context.Context) (string, []trainer.TrainJob, error) {
	targets, errs := o.targets(ctx)
	if err := errors.Join(errs...); err != nil {
		return "", nil, err
	}
	var b strings.Builder
	o.list(ctx, &b, targets)
	return b.String(), targets, nil
}

// list writes each TrainJob of targets with its stage and what it owns, and what it had no right to read.
func (o *DeleteOptions) list(ctx context.Context, w io.Writer, targets []trainer.TrainJob) {
	fmt.Fprintf(w, "These TrainJobs in namespace %q will be deleted with what they own (--cascade=%s):\n", o.Namespace, o.Cascade)
	var unreadable []string
	for _, tj := range targets {
		children, cannot := o.children(ctx, &tj)
		for _, c := range cannot {
			if !slices.Contains(unreadable, c) {
				unreadable = append(unreadable, c)
			}
		}
		owned := "nothing yet"
		if len(children) > 0 {
			owned = strings.Join(children, ", ")
		}
		fmt.Fprintf(w, "  trainjob/%s (%s): %s\n", tj.Name, stage.Of(&tj), printers.Escape(owned))
		if ref := metav1.GetControllerOf(&tj); ref != nil && ref.Kind == trainer.OptimizationJobKind {
			fmt.Fprintf(w, "    a trial of %s%s, which counts it as created and does not run it again\n", optimizationjob.Prefix, printers.Escape(ref.Name))
		}
	}
	if len(unreadable) > 0 {
		fmt.Fprintf(w, "  (not listed, no right to read them: %s)\n", strings.Join(unreadable, ", "))
	}
}

// confirmSearches lists the OptimizationJobs that will go, each with its trials, in one more request (the
// TrainJobs of the namespace: its trials are those it controls).
func (o *DeleteOptions) confirmSearches(ctx context.Context, searches []trainer.OptimizationJob) error {
	trainJobs, err := optimizationjob.ListTrials(ctx, o.Client, o.Namespace)
	if err != nil && !apierrors.IsForbidden(err) {
		return cmdutil.DescribeError(err, o.Namespace, "")
	}
	fmt.Fprintf(o.Streams.Out, "These OptimizationJobs in namespace %q will be deleted with their trials, the TrainJobs they control, and what those own (--cascade=%s):\n",
		o.Namespace, o.Cascade)
	byOwner := optimizationjob.ByOwner(trainJobs)
	for _, oj := range searches {
		s := optimizationjob.Summarize(&oj, byOwner[oj.UID], time.Now())
		trials := "no trials"
		switch {
		case err != nil:
			trials = "its trials (not listed, no right to read TrainJobs)"
		case len(s.Trials) > 0:
			names := make([]string, len(s.Trials))
			for i, t := range s.Trials {
				names[i] = "trainjob/" + t.Name + " (" + string(t.Stage) + ")"
			}
			trials = count(len(s.Trials), "trial") + ": " + strings.Join(names, ", ")
		}
		fmt.Fprintf(o.Streams.Out, "  %s%s (%s): %s\n", optimizationjob.Prefix, oj.Name, s.State, printers.Escape(trials))
	}
	return nil
}

// ask asks whether to delete what, and reads the answer.
func (o *DeleteOptions) ask(what string) (bool, error) {
	fmt.Fprintf(o.Streams.Out, "Delete %s? [y/N]: ", what)
	answer, err := bufio.NewReader(o.Streams.In).ReadString('\n')
	if err != nil && answer == "" {
		fmt.Fprintln(o.Streams.Out)
		return false, errors.New("no answer: nothing deleted")
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	fmt.Fprintln(o.Streams.Out, "Nothing deleted.")
	return false, nil
}

// ownedKinds are the kinds a controller makes for a TrainJob besides the JobSet (spec §3.3), and the claim
// template create makes for it, listed by metadata only: a Secret's data is never read.
var ownedKinds = []struct {
	name string
	gvk  schema.GroupVersionKind
}{
	{"configmap", corev1.SchemeGroupVersion.WithKind("ConfigMapList")},
	{"secret", corev1.SchemeGroupVersion.WithKind("SecretList")},
	{"podgroup", schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroupList"}},
	{"podgroup.volcano", schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroupList"}},
	// create --gpu-claim's: the TrainJob's pods claim their GPUs from it.
	{"resourceclaimtemplate", schema.GroupVersionKind{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaimTemplateList"}},
}

// children describes what tj owns: "jobset/x, 2 jobs, 8 pods, configmap/x-runtime-snapshot", and the kinds
// it had no right to read. The Jobs and pods are those whose controller chain ends at tj's JobSet
// (cmdutil.Lineage), not every one with its labels.
func (o *DeleteOptions) children(ctx context.Context, tj *trainer.TrainJob) (found, unreadable []string) {
	ns := client.InNamespace(tj.Namespace)
	note := func(kind string, err error) bool {
		if apierrors.IsForbidden(err) {
			unreadable = append(unreadable, kind)
		}
		return err == nil
	}
	js := &jobsetv1alpha2.JobSet{}
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Name}, js); !note("jobsets", err) {
		js = nil
	} else if metav1.IsControlledBy(js, tj) {
		found = append(found, "jobset/"+js.Name)
	}
	jobs := &batchv1.JobList{}
	jobsErr := o.Client.List(ctx, jobs, ns, cmdutil.ChildrenOf(tj.Name))
	lineage := cmdutil.NewLineage(tj, js, jobs.Items, jobsErr, o.Client)
	if note("jobs", jobsErr) {
		if n := len(lineage.Jobs(jobs.Items)); n > 0 {
			found = append(found, count(n, "job"))
		}
	}
	pods := &corev1.PodList{}
	if err := o.Client.List(ctx, pods, ns, cmdutil.ChildrenOf(tj.Name)); note("pods", err) {
		// A Job that fails to be read leaves the pods out: the prompt says what it could tell.
		if owned, _ := lineage.Pods(ctx, pods.Items); len(owned) > 0 {
			found = append(found, count(len(owned), "pod"))
		}
	}
	for _, k := range ownedKinds {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(k.gvk)
		err := o.Client.List(ctx, l, ns)
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			continue // that API is not installed
		}
		if !note(strings.ToLower(strings.TrimSuffix(k.gvk.Kind, "List"))+"s", err) {
			continue
		}
		for _, item := range l.Items {
			if metav1.IsControlledBy(&item, tj) {
				found = append(found, k.name+"/"+item.Name)
			}
		}
	}
	return found, unreadable
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// waitGone waits until every deleted TrainJob and OptimizationJob has disappeared: its name is free, or taken
// by another (another UID). It gives up on an error that does not pass.
func (o *DeleteOptions) waitGone(ctx context.Context, deleted []client.Object) error {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	for _, obj := range deleted {
		if err := o.waitOneGone(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// waitOneGone reads the object again on every change the watch reports, until it is gone.
func (o *DeleteOptions) waitOneGone(ctx context.Context, obj client.Object) error {
	resource, empty := cmdutil.Resource, func() client.Object { return &trainer.TrainJob{} }
	if _, ok := obj.(*trainer.OptimizationJob); ok {
		resource, empty = optimizationjob.Resource, func() client.Object { return &trainer.OptimizationJob{} }
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	// The watch tells when the TrainJob goes; the regular reads tell what a watch cannot: that the user lost
	// the right to read it, which would otherwise leave --wait without --timeout waiting forever.
	changes, err := cmdutil.Changes(watchCtx, o.Client, rereadInterval, cmdutil.Watch{Object: empty(), Namespace: obj.GetNamespace(),
		Options: []client.ListOption{client.MatchingFields{"metadata.name": obj.GetName()}}})
	if err != nil {
		return err
	}
	failures := 0
	for {
		got := empty()
		err := o.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)
		if apierrors.IsNotFound(err) || (err == nil && got.GetUID() != obj.GetUID()) {
			return nil
		}
		var retry <-chan time.Time
		if err != nil && ctx.Err() == nil {
			if failures++; !transient(err) || failures >= maxTransientErrors {
				return fmt.Errorf("gave up waiting for %s %q to be gone: %w", resource, obj.GetName(), cmdutil.DescribeError(err, o.Namespace, obj.GetName()))
			}
			retry = time.After(retryInterval) // the watch may be down too
		} else {
			failures = 0
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return cmdutil.WithExitCode(cmdutil.ExitTimeout, fmt.Errorf("timed out after %s waiting for %s %q to be gone (with --cascade=foreground it waits for its children)",
					o.Timeout, resource, obj.GetName()))
			}
			return ctx.Err()
		case <-changes:
		case <-retry:
		}
	}
}

// transient tells an error that may pass by itself (the API server slow, overloaded or restarting) from one
// that will not (forbidden, unauthorized, a bad request).
func transient(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || utilnet.IsConnectionRefused(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}
