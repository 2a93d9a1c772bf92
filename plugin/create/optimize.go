package create

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/optimizationjob"
)

const optimizeLong = `Create an OptimizationJob (KEP-2605): a hyperparameter search whose trials are TrainJobs.

The trials are TrainJobs of the template that create's flags describe (--runtime, --image,
--nodes, --env, ...; the trainer's command after --). The OptimizationJob controller creates
--trials of them, at most --parallel at once, each with its parameters in the environment
variables KUBEFLOW_TRAINER_OPT_<NAME> (lr: KUBEFLOW_TRAINER_OPT_LR). Each trial reports the
--objective metric through the TrainJob status server (status.trainerStatus.metrics); the best
trial is the one whose last report is lowest (min) or highest (max).

--param NAME=KIND:VALUES, once per hyperparameter:
  uniform:MIN,MAX          a number between MIN and MAX
  loguniform:MIN,MAX       the same on a log scale (MIN > 0): learning rates
  uniform-int:MIN,MAX      a whole number, loguniform-int:MIN,MAX on a log scale
  categorical:A,B,...      one of the values listed
--algorithm grid tries every combination of categorical parameters; random (the default)
draws each trial's values, the same ones for the same --seed.

The parameters are checked by the controller's own parser before anything is sent. The
runtime must exist, as for create. kubectl trainjob status optimizationjob/NAME then shows
the trials, best first.`

const optimizeExample = `  # 20 trials of random search, 4 at once, over the learning rate and the batch size
  kubectl trainjob optimize sweep --runtime torch-distributed --image ghcr.io/example/train:1.0 \
    --param lr=loguniform:1e-5,1e-2 --param batch=categorical:16,32,64 \
    --objective val_loss:min --trials 20 --parallel 4 -- torchrun train.py

  # Every combination of two categorical parameters
  kubectl trainjob optimize grid --runtime torch-distributed --algorithm grid --trials 6 \
    --param batch=categorical:16,32,64 --param opt=categorical:adam,sgd --objective accuracy:max

  # Print the OptimizationJob without creating it
  kubectl trainjob optimize sweep --runtime torch-distributed --param lr=loguniform:1e-5,1e-2 \
    --objective loss --dry-run=client -o yaml

  # From a file
  kubectl trainjob optimize -f optimizationjob.yaml`

// OptimizeOptions are the options of `kubectl trainjob optimize`: create's, which describe the trials'
// template and how the OptimizationJob is sent and printed, and the search's.
type OptimizeOptions struct {
	CreateOptions
	search searchFlags
}

var _ cmdutil.Command = (*OptimizeOptions)(nil)

// searchFlags are the flags of the search: the spec of an OptimizationJob but its template.
type searchFlags struct {
	params    []string
	objective string
	trials    int32
	parallel  int32
	algorithm string
	// seed is --seed when given.
	seed     *int64
	seedFlag int64
}

// searchFlagNames are the flags addFlags adds, which -f excludes.
var searchFlagNames = []string{"param", "objective", "trials", "parallel", "algorithm", "seed"}

func (s *searchFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringArrayVar(&s.params, "param", nil, "Hyperparameter NAME=KIND:VALUES, KIND uniform, loguniform, uniform-int, loguniform-int (MIN,MAX) or categorical (A,B,...) (repeatable)")
	fl.StringVar(&s.objective, "objective", "", "The metric the trials report and its direction, METRIC:min or METRIC:max (default min)")
	fl.Int32Var(&s.trials, "trials", 1, "Number of trials in all (the API's numTrials)")
	fl.Int32Var(&s.parallel, "parallel", 1, "Number of trials at once (the API's parallelTrials)")
	fl.StringVar(&s.algorithm, "algorithm", search.Random, "Search algorithm: random or grid")
	fl.Int64Var(&s.seedFlag, "seed", 0, "Seed of the random search: the same seed draws the same trials (default: the controller's)")
}

// NewCmdOptimize is `kubectl trainjob optimize`.
func NewCmdOptimize(f cmdutil.Factory, streams cmdutil.Streams) *cobra.Command {
	o := &OptimizeOptions{CreateOptions: *NewCreateOptions(streams)}
	cmd := &cobra.Command{
		Use:                   "optimize NAME --runtime RUNTIME --param NAME=KIND:VALUES... --objective METRIC[:min|max] [flags] [-- COMMAND [ARG...]] | optimize -f FILE",
		DisableFlagsInUseLine: true,
		Short:                 "Search hyperparameters: create an OptimizationJob whose trials are TrainJobs",
		Long:                  optimizeLong,
		Example:               optimizeExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCommand(f, o, cmd, args)
		},
	}
	o.addObjectFlags(f, cmd, trainer.OptimizationJobKind)
	o.search.addFlags(cmd.Flags())
	o.addSendFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("algorithm", cobra.FixedCompletions([]string{search.Random, search.Grid}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Complete resolves NAME, the trainer's command, the namespace and the clients, as create does.
func (o *OptimizeOptions) Complete(f cmdutil.Factory, cmd *cobra.Command, args []string) error {
	args, err := o.completeCommand(cmd, args)
	if err != nil {
		return err
	}
	switch {
	case len(args) > 1:
		return fmt.Errorf("too many arguments %q: give one NAME (the trainer's command goes after --)", args)
	case len(args) == 1:
		o.spec.name = args[0]
	case o.Filename == "":
		return errors.New("give a NAME, --runtime, --param and --objective, or -f FILE; see kubectl trainjob optimize --help")
	}
	o.spec.complete(cmd.Flags())
	if cmd.Flags().Changed("seed") {
		o.search.seed = ptr.To(o.search.seedFlag)
	}
	if o.Filename != "" {
		if err := o.fileAlone(cmd.Flags(), searchFlagNames...); err != nil {
			return err
		}
	}
	return o.completeRun(f)
}

// Validate rejects a bad --dry-run and, from flags, a search the controller would refuse.
func (o *OptimizeOptions) Validate() error {
	if err := o.CreateOptions.Validate(); err != nil {
		return err
	}
	if o.Filename != "" {
		return nil
	}
	_, err := o.search.spec()
	return err
}

// Run builds the OptimizationJob, checks its trials' runtime, creates it and prints it.
func (o *OptimizeOptions) Run(ctx context.Context) error {
	oj, err := o.optimizationJob()
	if err != nil {
		return err
	}
	// The trials' runtime and fit are checked on a TrainJob of the template, as create checks its own.
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: oj.Name, Namespace: oj.Namespace}, Spec: oj.Spec.TrainJobTemplate.Spec}
	rt, err := o.checkRuntime(ctx, tj)
	if err != nil {
		return err
	}
	if o.spec.gpuType != "" {
		selectGPUType(tj, rt, o.spec.gpuType)
	}
	oj.Spec.TrainJobTemplate.Spec = tj.Spec
	switch o.DryRun {
	case dryRunServer:
		err = o.client.Create(ctx, oj, client.DryRunAll)
	case dryRunNone:
		o.warnIfNowhere(ctx, tj, rt, nil)
		err = o.client.Create(ctx, oj)
	}
	if err != nil {
		return createError(err, "optimizationjob", oj.Namespace, oj.Name)
	}
	if err := o.printer.PrintObj(oj, o.Out); err != nil {
		return err
	}
	if o.DryRun == dryRunNone && ptr.Deref(o.PrintFlags.OutputFormat, "") == "" {
		fmt.Fprintf(o.Out, "Follow its trials with: kubectl trainjob status %s%s\n", optimizationjob.Prefix, oj.Name)
	}
	return nil
}

// optimizationJob is the OptimizationJob of the flags or of the file, its search checked as the
// controller checks it.
func (o *OptimizeOptions) optimizationJob() (*trainer.OptimizationJob, error) {
	if o.Filename != "" {
		data, err := o.read()
		if err != nil {
			return nil, err
		}
		oj := &trainer.OptimizationJob{}
		if err := decodeOne(data, o.Filename, oj, o.spec.name, o.spec.namespace, o.namespaceGiven); err != nil {
			return nil, err
		}
		if oj.Spec.TrainJobTemplate.Spec.RuntimeRef.Name == "" {
			return nil, fmt.Errorf("the OptimizationJob in %s has no spec.trainJobTemplate.spec.runtimeRef.name; list runtimes with: kubectl trainjob runtimes", o.Filename)
		}
		if _, err := search.New(&oj.Spec, 0); err != nil {
			return nil, fmt.Errorf("the OptimizationJob in %s: %w", o.Filename, err)
		}
		return oj, nil
	}
	spec, err := o.search.spec()
	if err != nil {
		return nil, err
	}
	if err := checkName(trainer.OptimizationJobKind, o.spec.name); err != nil {
		return nil, err
	}
	tj, err := o.spec.trainJob()
	if err != nil {
		return nil, err
	}
	spec.TrainJobTemplate = trainer.TrainJobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: tj.Labels, Annotations: tj.Annotations},
		Spec:       tj.Spec,
	}
	return &trainer.OptimizationJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.OptimizationJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: o.spec.name, Namespace: o.spec.namespace},
		Spec:       *spec,
	}, nil
}

// paramHelp ends every error of --param's syntax.
const paramHelp = "write it as NAME=KIND:VALUES with KIND uniform, loguniform, uniform-int, loguniform-int (MIN,MAX) or categorical (A,B,...), e.g. --param lr=loguniform:1e-5,1e-2"

// double is the API's pattern of a bound (trainer.Double): the API server refuses any other spelling.
var double = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// spec is the OptimizationJobSpec of the flags, without its template. Its parameters are checked by
// pkg/optimization/search, the controller's parser, and its errors name the --param at fault.
func (s *searchFlags) spec() (*trainer.OptimizationJobSpec, error) {
	if len(s.params) == 0 {
		return nil, errors.New("--param is required: give each hyperparameter to search, e.g. --param lr=loguniform:1e-5,1e-2 --param batch=categorical:16,32,64")
	}
	spec := &trainer.OptimizationJobSpec{NumTrials: s.trials, ParallelTrials: s.parallel}
	kinds := make([]string, len(s.params))
	for i, value := range s.params {
		p, kind, err := parameter(value)
		if err != nil {
			return nil, err
		}
		for _, q := range spec.Parameters {
			if q.Name == p.Name {
				return nil, fmt.Errorf("invalid --param %q: %s is given twice", value, p.Name)
			}
		}
		spec.Parameters, kinds[i] = append(spec.Parameters, p), kind
	}
	if _, err := search.New(spec, 0); err != nil {
		return nil, paramError(err, s.params)
	}
	switch s.algorithm {
	case search.Random:
		spec.SearchAlgorithm = &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{Seed: s.seed}}
	case search.Grid:
		for i, p := range spec.Parameters {
			if p.SearchSpace.Categorical.Choices == nil {
				return nil, fmt.Errorf("--algorithm grid needs every --param categorical, and %s is %s: use --algorithm random, or list its values: --param %s=categorical:A,B,...", p.Name, kinds[i], p.Name)
			}
		}
		if s.seed != nil {
			return nil, errors.New("--seed applies to --algorithm random only: drop it")
		}
		spec.SearchAlgorithm = &trainer.SearchAlgorithm{Grid: &trainer.GridAlgorithm{}}
	default:
		return nil, fmt.Errorf("invalid --algorithm %q: use %s or %s", s.algorithm, search.Random, search.Grid)
	}
	objective, err := objective(s.objective)
	if err != nil {
		return nil, err
	}
	spec.Objectives = []trainer.Objective{objective}
	for _, n := range []struct {
		flag  string
		value int32
	}{{"trials", s.trials}, {"parallel", s.parallel}} {
		if n.value < 1 || n.value > 100 {
			return nil, fmt.Errorf("invalid --%s %d: use 1 to 100", n.flag, n.value)
		}
	}
	if s.parallel > s.trials {
		return nil, fmt.Errorf("--parallel %d is more than --trials %d: at most --trials run at once", s.parallel, s.trials)
	}
	return spec, nil
}

// parameter parses --param NAME=KIND:VALUES; kind is KIND as given, for messages.
func parameter(value string) (p trainer.Parameter, kind string, err error) {
	bad := func(what string) error {
		if what != "" {
			what = ": " + what
		}
		return fmt.Errorf("invalid --param %q%s; %s", value, what, paramHelp)
	}
	name, rest, ok := strings.Cut(value, "=")
	if !ok || name == "" {
		return p, "", bad("")
	}
	kind, values, ok := strings.Cut(rest, ":")
	if !ok {
		return p, "", bad("no KIND before the values")
	}
	p = trainer.Parameter{Name: name, SearchSpace: &trainer.SearchSpace{}}
	list := strings.Split(values, ",")
	if strings.ToLower(kind) == "categorical" {
		for _, c := range list {
			if c == "" {
				return p, "", bad("a choice is empty")
			}
		}
		p.SearchSpace.Categorical.Choices = list
		return p, kind, nil
	}
	typ := trainer.ParameterTypeFloat
	base, isInt := strings.CutSuffix(strings.ToLower(kind), "-int")
	if isInt {
		typ = trainer.ParameterTypeInt
	}
	if base != "uniform" && base != "loguniform" {
		return p, "", bad(fmt.Sprintf("unknown KIND %q", kind))
	}
	if len(list) != 2 {
		return p, "", bad(kind + " takes two values, MIN,MAX")
	}
	for _, v := range list {
		if !double.MatchString(v) {
			return p, "", fmt.Errorf("invalid --param %q: %q is not a number as the API writes them: write it like 0.1, 5 or 1e-3", value, v)
		}
	}
	lo, hi := trainer.Double(list[0]), trainer.Double(list[1])
	if base == "uniform" {
		p.SearchSpace.Uniform = trainer.UniformSpace{Min: lo, Max: hi, Type: typ}
	} else {
		p.SearchSpace.LogUniform = trainer.LogUniformSpace{Min: lo, Max: hi, Type: typ}
	}
	return p, kind, nil
}

// parameterIndex finds the index of spec.parameters[i] in a field path of search's errors.
var parameterIndex = regexp.MustCompile(`^spec\.parameters\[(\d+)\]`)

// paramError is the first of search's errors, said of the --param at fault.
func paramError(err error, params []string) error {
	var agg utilerrors.Aggregate
	var fe *field.Error
	if !errors.As(err, &agg) || len(agg.Errors()) == 0 || !errors.As(agg.Errors()[0], &fe) {
		return err
	}
	m := parameterIndex.FindStringSubmatch(fe.Field)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[1])
	detail := fe.Detail
	if fe.Type == field.ErrorTypeDuplicate {
		detail = fmt.Sprint(fe.BadValue)
	}
	return fmt.Errorf("invalid --param %q: %s", params[i], detail)
}

// objective parses --objective METRIC[:min|max].
func objective(value string) (trainer.Objective, error) {
	if value == "" {
		return trainer.Objective{}, errors.New("--objective is required: name the metric the trials report and whether to minimize or maximize it, e.g. --objective val_loss:min")
	}
	metric, direction, _ := strings.Cut(value, ":")
	o := trainer.Objective{Metric: metric, Direction: trainer.ObjectiveDirectionMinimize}
	switch strings.ToLower(direction) {
	case "", "min", "minimize":
	case "max", "maximize":
		o.Direction = trainer.ObjectiveDirectionMaximize
	default:
		return o, fmt.Errorf("invalid --objective %q: the direction is min or max, e.g. --objective val_loss:min", value)
	}
	if metric == "" || len(metric) > 64 {
		return o, fmt.Errorf("invalid --objective %q: name the metric (1 to 64 characters), e.g. --objective val_loss:min", value)
	}
	return o, nil
}
