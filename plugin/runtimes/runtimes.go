// Package runtimes is `kubectl trainjob runtimes`: the TrainingRuntimes of a namespace and the
// ClusterTrainingRuntimes a TrainJob can run on, with their framework, ML policy, nodes and GPUs.
package runtimes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	cliprinters "k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/printers"
)

const runtimesLong = `List the runtimes a TrainJob can run on: the TrainingRuntimes of the namespace
(of every namespace with -A) and the ClusterTrainingRuntimes.

FRAMEWORK is the label trainer.kubeflow.org/framework, POLICY the runtime's ML policy
(torch, mpi, jax, xgboost, flux, or plainml when it has none), NODES its mlPolicy.numNodes
and GPUS the GPUs of each trainer node. A user who may not list
ClusterTrainingRuntimes still sees the TrainingRuntimes, with a note.`

const runtimesExample = `  # The runtimes usable in the current namespace
  kubectl trainjob runtimes

  # TrainingRuntimes of every namespace too
  kubectl trainjob runtimes -A

  # Names only
  kubectl trainjob runtimes -o name`

// RuntimesOptions are the options of `kubectl trainjob runtimes`.
type RuntimesOptions struct {
	AllNamespaces bool
	NoHeaders     bool
	PrintFlags    *genericclioptions.PrintFlags
	// Clock gives the AGE column its now.
	Clock clock.PassiveClock

	namespace string
	client    client.Client
	cmdutil.Streams
}

var _ cmdutil.Command = (*RuntimesOptions)(nil)

// NewRuntimesOptions returns the defaults of the flags.
func NewRuntimesOptions(streams cmdutil.Streams) *RuntimesOptions {
	return &RuntimesOptions{
		Streams:    streams,
		PrintFlags: genericclioptions.NewPrintFlags(""),
		Clock:      clock.RealClock{},
	}
}

// NewCmdRuntimes is `kubectl trainjob runtimes`.
func NewCmdRuntimes(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	return NewCmdRuntimesWithOptions(f, NewRuntimesOptions(streams))
}

// NewCmdRuntimesWithOptions is `kubectl trainjob runtimes` with preset options (a pinned clock in tests).
func NewCmdRuntimesWithOptions(f cmdutil.Factory, o *RuntimesOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "runtimes [-A] [-o FORMAT]",
		Aliases: []string{"runtime"},
		Short:   "List TrainingRuntimes and ClusterTrainingRuntimes",
		Long:    runtimesLong,
		Example: runtimesExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "List the TrainingRuntimes of every namespace")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "Print the table without its header")
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete resolves the namespace and the client.
func (o *RuntimesOptions) Complete(f cmdutil.Factory, _ *cobra.Command, _ []string) error {
	var err error
	if o.namespace, _, err = f.Namespace(); err != nil {
		return err
	}
	o.PrintFlags.WithTypeSetter(f.Scheme())
	o.client, err = f.Client()
	return err
}

// Validate has nothing to check: cobra refuses arguments, and the printer refuses an unknown -o once there is
// something to print.
func (o *RuntimesOptions) Validate() error { return nil }

// Run lists and prints.
func (o *RuntimesOptions) Run(ctx context.Context) error {
	var namespaced trainer.TrainingRuntimeList
	opts := []client.ListOption{}
	if !o.AllNamespaces {
		opts = append(opts, client.InNamespace(o.namespace))
	}
	// What the user may not list is left out with a note, except TrainingRuntimes with -A, which is what
	// was asked for.
	hidden := false
	if err := o.client.List(ctx, &namespaced, opts...); err != nil {
		if !apierrors.IsForbidden(err) || o.AllNamespaces {
			return listError(err, "trainingruntimes", o.AllNamespaces, o.namespace)
		}
		hidden = true
		fmt.Fprintf(o.ErrOut, "note: the TrainingRuntimes of namespace %s are not shown: you may not list them\n", o.namespace)
	}
	var cluster trainer.ClusterTrainingRuntimeList
	if err := o.client.List(ctx, &cluster); err != nil {
		if !apierrors.IsForbidden(err) {
			return listError(err, "clustertrainingruntimes", true, "")
		}
		hidden = true
		fmt.Fprintln(o.ErrOut, "note: ClusterTrainingRuntimes are not shown: you may not list them")
	}
	runtimes := collect(cluster.Items, namespaced.Items)
	if len(runtimes) == 0 {
		switch {
		case hidden:
		case o.AllNamespaces:
			fmt.Fprintln(o.ErrOut, "No resources found")
		default:
			fmt.Fprintf(o.ErrOut, "No resources found in %s namespace.\n", o.namespace)
		}
		return nil
	}
	if ptr.Deref(o.PrintFlags.OutputFormat, "") == "" {
		return cliprinters.NewTablePrinter(cliprinters.PrintOptions{NoHeaders: o.NoHeaders, WithNamespace: o.AllNamespaces}).PrintObj(o.table(ctx, runtimes), o.Out)
	}
	p, err := o.PrintFlags.ToPrinter()
	if err != nil {
		return err
	}
	list := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, r := range runtimes {
		list.Items = append(list.Items, runtime.RawExtension{Object: r.object})
	}
	// One object prints as itself, as kubectl get does; -o name prints every object by itself.
	if len(list.Items) == 1 || ptr.Deref(o.PrintFlags.OutputFormat, "") == "name" {
		for _, item := range list.Items {
			if err := p.PrintObj(item.Object, o.Out); err != nil {
				return err
			}
		}
		return nil
	}
	return p.PrintObj(list, o.Out)
}

// trainingRuntime is either kind of runtime, for printing.
type trainingRuntime struct {
	kind   string
	meta   *metav1.ObjectMeta
	spec   *trainer.TrainingRuntimeSpec
	object runtime.Object
}

// collect puts the ClusterTrainingRuntimes first, then the TrainingRuntimes by namespace, each by name.
func collect(cluster []trainer.ClusterTrainingRuntime, namespaced []trainer.TrainingRuntime) []trainingRuntime {
	var out []trainingRuntime
	for i := range cluster {
		r := &cluster[i]
		r.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.ClusterTrainingRuntimeKind))
		out = append(out, trainingRuntime{kind: trainer.ClusterTrainingRuntimeKind, meta: &r.ObjectMeta, spec: &r.Spec, object: r})
	}
	for i := range namespaced {
		r := &namespaced[i]
		r.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainingRuntimeKind))
		out = append(out, trainingRuntime{kind: trainer.TrainingRuntimeKind, meta: &r.ObjectMeta, spec: &r.Spec, object: r})
	}
	slices.SortStableFunc(out, func(a, b trainingRuntime) int {
		if a.kind != b.kind {
			return strings.Compare(a.kind, b.kind) // ClusterTrainingRuntime < TrainingRuntime
		}
		if c := strings.Compare(a.meta.Namespace, b.meta.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.meta.Name, b.meta.Name)
	})
	return out
}

// table is the human view of the runtimes. The GPUs a runtime's pods claim through DRA are those of the
// ResourceClaimTemplates they name in the namespace a TrainJob would run in: a TrainingRuntime's own, the
// command's for a ClusterTrainingRuntime; a namespace's templates are read in one request, only for a runtime
// whose pods have claims.
func (o *RuntimesOptions) table(ctx context.Context, runtimes []trainingRuntime) *metav1.Table {
	var claims client.Reader
	if o.client != nil {
		claims = cmdutil.NewClaimTemplates(o.client)
	}
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Kind", Type: "string"},
		{Name: "Framework", Type: "string"},
		{Name: "Policy", Type: "string"},
		{Name: "Nodes", Type: "string"},
		{Name: "GPUs", Type: "string"},
		{Name: "Age", Type: "string"},
	}}
	now := o.Clock.Now()
	for _, r := range runtimes {
		framework := r.meta.Labels[trainer.FrameworkLabel]
		if framework == "" {
			framework = printers.None
		}
		nodes := printers.None
		if r.spec.MLPolicy != nil && r.spec.MLPolicy.NumNodes != nil {
			nodes = strconv.Itoa(int(*r.spec.MLPolicy.NumNodes))
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{r.meta.Name, r.kind, framework, Policy(r.spec.MLPolicy), nodes, gpusPerNode(ctx, claims, cmp.Or(r.meta.Namespace, o.namespace), r.spec), printers.Age(r.meta.CreationTimestamp, now)},
			Object: runtime.RawExtension{Object: r.object},
		})
	}
	return t
}

// Policy names a runtime's ML policy: torch, mpi, jax, xgboost, flux, or plainml when it sets none.
func Policy(p *trainer.MLPolicy) string {
	switch {
	case p == nil:
		return "plainml"
	case p.Torch != nil:
		return "torch"
	case p.MPI != nil:
		return "mpi"
	case p.JAX != nil:
		return "jax"
	case p.XGBoost != nil:
		return "xgboost"
	case p.Flux != nil:
		return "flux"
	}
	return "plainml"
}

// gpusPerNode is the GPUs per node of the runtime's trainer, as the pipeline counts them for a TrainJob of
// namespace that does not set resourcesPerNode (and as list shows them): the DRA claims' with claims (nil:
// none).
func gpusPerNode(ctx context.Context, claims client.Reader, namespace string, spec *trainer.TrainingRuntimeSpec) string {
	info, err := pipeline.NewRuntimeInfo(&trainer.TrainJob{}, &pipeline.Runtime{Object: &trainer.ClusterTrainingRuntime{}, Spec: spec})
	if err == nil && claims != nil {
		err = info.ReadClaims(ctx, claims, namespace)
	}
	if err != nil {
		return printers.None
	}
	if n := info.TrainerGPUs(); n > 0 {
		return strconv.FormatInt(n, 10)
	}
	return printers.None
}

func listError(err error, resource string, allNamespaces bool, namespace string) error {
	where := fmt.Sprintf(" in namespace %q", namespace)
	if allNamespaces {
		where = " in all namespaces"
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("you may not list %s%s: %s", resource, where, statusMessage(err))
	}
	return fmt.Errorf("cannot list %s%s: %w", resource, where, err)
}

func statusMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}
