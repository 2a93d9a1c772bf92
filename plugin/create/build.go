package create

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/completion"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/kueue"
)

// gpuResource is the resource --gpus-per-node sets.
const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// resourcesExample is the example every --resources-per-node error shows.
const resourcesExample = "--resources-per-node cpu=4,memory=16Gi,nvidia.com/gpu=8"

// spec is what the flags say about the TrainJob to create, or about what to change in a copy (create
// --from, rerun --set).
type spec struct {
	name             string
	namespace        string
	runtime          string
	image            string
	nodes            *int32
	gpusPerNode      *int64
	resourcesPerNode string
	env              []string
	datasetURI       string
	modelURI         string
	suspend          *bool
	labels           []string
	annotations      []string
	queue            string
	gpuType          string
	topology         string
	gpuClaim         string
	command          []string

	// The values of the flags whose zero value a user may mean (--nodes 0 is refused, --suspend=false
	// resumes a copy): nodes, gpusPerNode and suspend are set from them only when the flag is given.
	nodesFlag   int32
	gpusFlag    int64
	suspendFlag bool

	// claimedGPUs are the GPUs per node --gpu-claim claims, settled by applyTo.
	claimedGPUs int64
}

// addFlags adds the flags that say what the TrainJob is: create's own, and the names rerun --set takes.
func (s *spec) addFlags(fl *pflag.FlagSet) {
	fl.StringVarP(&s.runtime, "runtime", "r", "", "Runtime: NAME of a ClusterTrainingRuntime, or trainingruntime/NAME")
	fl.StringVar(&s.image, "image", "", "Image of the trainer container")
	fl.Int32Var(&s.nodesFlag, "nodes", 0, "Number of training nodes (default: the runtime's)")
	fl.Int64Var(&s.gpusFlag, "gpus-per-node", 0, "nvidia.com/gpu requested and limited per node")
	fl.StringVar(&s.resourcesPerNode, "resources-per-node", "", "Resources requested and limited per node, e.g. cpu=4,memory=16Gi,nvidia.com/gpu=8")
	fl.StringArrayVar(&s.env, "env", nil, "Environment variable of the trainer, NAME=VALUE (repeatable)")
	fl.StringVar(&s.datasetURI, "dataset-uri", "", "storageUri of the dataset initializer, e.g. hf://tatsu-lab/alpaca")
	fl.StringVar(&s.modelURI, "model-uri", "", "storageUri of the model initializer, e.g. hf://meta-llama/Llama-3.2-1B-Instruct")
	fl.BoolVar(&s.suspendFlag, "suspend", false, "Create the TrainJob suspended")
	fl.StringArrayVar(&s.labels, "label", nil, "Label of the TrainJob, KEY=VALUE (repeatable)")
	fl.StringArrayVar(&s.annotations, "annotation", nil, "Annotation of the TrainJob, KEY=VALUE (repeatable)")
	fl.StringVar(&s.queue, "queue", "", "Kueue LocalQueue (sets the label "+kueue.QueueLabel+")")
	fl.StringVar(&s.gpuType, "gpu-type", "", "GPU model of the trainer's nodes: their label "+completion.GPUProductLabel+", e.g. NVIDIA-A100-SXM4-80GB")
	fl.StringVar(&s.topology, "topology", "", "With --queue: Kueue places the trainer's pods within one domain of a level of its Topology, LEVEL[:required|:preferred], e.g. rack (required) or rack:preferred")
	fl.StringVar(&s.gpuClaim, "gpu-claim", "", "Claim the --gpus-per-node GPUs through DRA, devices of the DeviceClass given (--gpu-claim alone: "+defaultGPUDeviceClass+"), from a ResourceClaimTemplate the TrainJob owns")
	fl.Lookup("gpu-claim").NoOptDefVal = defaultGPUDeviceClass
}

// specFlagNames are the names of the flags addFlags adds, in its order.
func specFlagNames() []string {
	fl := pflag.NewFlagSet("spec", pflag.ContinueOnError)
	fl.SortFlags = false
	(&spec{}).addFlags(fl)
	var names []string
	fl.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// complete sets nodes, gpusPerNode and suspend from the flags of fl that were given.
func (s *spec) complete(fl *pflag.FlagSet) {
	if fl.Changed("nodes") {
		s.nodes = ptr.To(s.nodesFlag)
	}
	if fl.Changed("gpus-per-node") {
		s.gpusPerNode = ptr.To(s.gpusFlag)
	}
	if fl.Changed("suspend") {
		s.suspend = ptr.To(s.suspendFlag)
	}
}

// set takes rerun's --set FLAG=VALUE: each is the create flag FLAG given the value VALUE, parsed as create
// parses it (a repeatable flag, such as env, may be set several times).
func (s *spec) set(assignments []string) error {
	fl := pflag.NewFlagSet("set", pflag.ContinueOnError)
	s.addFlags(fl)
	for _, a := range assignments {
		name, value, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return fmt.Errorf("invalid --set %q: write it as FLAG=VALUE with a flag of create, e.g. --set nodes=4", a)
		}
		flag := fl.Lookup(name)
		if flag == nil {
			return fmt.Errorf("invalid --set %q: %s is not a flag create takes; use one of %s", a, name, strings.Join(specFlagNames(), ", "))
		}
		if err := fl.Set(name, value); err != nil {
			what := map[string]string{"bool": "true or false", "int32": "a whole number", "int64": "a whole number"}[flag.Value.Type()]
			if what == "" {
				return fmt.Errorf("invalid --set %q: %v", a, err)
			}
			return fmt.Errorf("invalid --set %q: --%s takes %s, not %q", a, name, what, value)
		}
	}
	s.complete(fl)
	return nil
}

// runtimeRef turns --runtime into a reference: NAME is a ClusterTrainingRuntime (the API's default kind), and
// trainingruntime/NAME or clustertrainingruntime/NAME names the kind.
func runtimeRef(value string) (trainer.RuntimeRef, error) {
	kind, name := trainer.ClusterTrainingRuntimeKind, value
	if k, n, ok := strings.Cut(value, "/"); ok {
		switch strings.ToLower(k) {
		case "trainingruntime", "trainingruntimes":
			kind = trainer.TrainingRuntimeKind
		case "clustertrainingruntime", "clustertrainingruntimes":
		default:
			return trainer.RuntimeRef{}, fmt.Errorf("invalid --runtime %q: use NAME (a ClusterTrainingRuntime) or %sNAME", value, completion.RuntimeKindPrefix)
		}
		name = n
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return trainer.RuntimeRef{}, fmt.Errorf("invalid --runtime %q: %s", value, strings.Join(errs, "; "))
	}
	return trainer.RuntimeRef{Name: name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(kind)}, nil
}

// trainJob builds the TrainJob the flags describe. It only reads the flags: whether the runtime exists is
// checked against the cluster later.
func (s *spec) trainJob() (*trainer.TrainJob, error) {
	if err := checkName(trainer.TrainJobKind, s.name); err != nil {
		return nil, err
	}
	if s.runtime == "" {
		return nil, fmt.Errorf("--runtime is required: name a ClusterTrainingRuntime, or %sNAME; list runtimes with: kubectl trainjob runtimes", completion.RuntimeKindPrefix)
	}
	tj := &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace},
	}
	if err := s.applyTo(tj); err != nil {
		return nil, err
	}
	return tj, nil
}

// checkName applies the API's rule for a TrainJob's name (an OptimizationJob's names its trials), so the
// error comes before anything is sent.
func checkName(kind, name string) error {
	if len(validation.IsDNS1035Label(name)) > 0 {
		return fmt.Errorf("invalid %s name %q: use at most 63 lower case letters, digits and '-', starting with a letter and ending with a letter or digit", kind, name)
	}
	return nil
}

// applyTo sets on tj what the flags say and leaves the rest of tj as it is: create makes a TrainJob of the
// flags alone, create --from and rerun change a copy. Labels, annotations and env vars given replace those of
// the same key and add the others; resources given replace those of the same name in both requests and
// limits.
func (s *spec) applyTo(tj *trainer.TrainJob) error {
	if s.runtime != "" {
		ref, err := runtimeRef(s.runtime)
		if err != nil {
			return err
		}
		tj.Spec.RuntimeRef = ref
	}
	labels, err := keyValues("--label", s.labels, true)
	if err != nil {
		return err
	}
	if s.queue != "" {
		if errs := validation.IsValidLabelValue(s.queue); len(errs) > 0 {
			return fmt.Errorf("invalid --queue %q: %s", s.queue, strings.Join(errs, "; "))
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[kueue.QueueLabel] = s.queue
	}
	if errs := validation.IsValidLabelValue(s.gpuType); len(errs) > 0 {
		return fmt.Errorf("invalid --gpu-type %q: %s; give a value of the nodes' label %s, e.g. NVIDIA-A100-SXM4-80GB", s.gpuType, strings.Join(errs, "; "), completion.GPUProductLabel)
	}
	if s.gpuClaim != "" {
		if errs := validation.IsDNS1123Subdomain(s.gpuClaim); len(errs) > 0 {
			return fmt.Errorf("invalid --gpu-claim %q: %s; give the name of a DeviceClass, e.g. --gpu-claim=%s", s.gpuClaim, strings.Join(errs, "; "), defaultGPUDeviceClass)
		}
	}
	tj.Labels = merged(tj.Labels, labels)
	if s.topology != "" {
		if _, _, err := parseTopology(s.topology); err != nil {
			return err
		}
		if tj.Labels[kueue.QueueLabel] == "" {
			return fmt.Errorf("--topology %s asks Kueue to place the pods: give --queue too (a LocalQueue whose ClusterQueue has a ResourceFlavor with a Topology)", s.topology)
		}
	}
	annotations, err := keyValues("--annotation", s.annotations, false)
	if err != nil {
		return err
	}
	tj.Annotations = merged(tj.Annotations, annotations)
	if s.suspend != nil {
		// false is the API's default: a copy of a suspended TrainJob given --suspend=false runs.
		tj.Spec.Suspend = nil
		if *s.suspend {
			tj.Spec.Suspend = ptr.To(true)
		}
	}
	if err := s.applyInitializer(&tj.Spec); err != nil {
		return err
	}
	tj.Spec.Trainer, err = s.applyTrainer(tj.Spec.Trainer)
	return err
}

// applyInitializer sets the storageUri of the dataset and model initializers the flags give.
func (s *spec) applyInitializer(spec *trainer.TrainJobSpec) error {
	if s.datasetURI != "" {
		if err := checkURI("--dataset-uri", s.datasetURI); err != nil {
			return err
		}
		if spec.Initializer == nil {
			spec.Initializer = &trainer.Initializer{}
		}
		if spec.Initializer.Dataset == nil {
			spec.Initializer.Dataset = &trainer.DatasetInitializer{}
		}
		spec.Initializer.Dataset.StorageUri = ptr.To(s.datasetURI)
	}
	if s.modelURI != "" {
		if err := checkURI("--model-uri", s.modelURI); err != nil {
			return err
		}
		if spec.Initializer == nil {
			spec.Initializer = &trainer.Initializer{}
		}
		if spec.Initializer.Model == nil {
			spec.Initializer.Model = &trainer.ModelInitializer{}
		}
		spec.Initializer.Model.StorageUri = ptr.To(s.modelURI)
	}
	return nil
}

// applyTrainer is t (spec.trainer) with what the flags set; t stays nil when no flag sets any of it, so that
// the runtime decides.
func (s *spec) applyTrainer(t *trainer.Trainer) (*trainer.Trainer, error) {
	if s.nodes != nil && *s.nodes < 0 {
		return nil, fmt.Errorf("invalid --nodes %d: use 1 or more", *s.nodes)
	}
	env, err := envVars(s.env)
	if err != nil {
		return nil, err
	}
	res, err := parseResources(s.resourcesPerNode)
	if err != nil {
		return nil, err
	}
	if s.gpusPerNode != nil {
		if *s.gpusPerNode < 0 {
			return nil, fmt.Errorf("invalid --gpus-per-node %d: use 0 or more", *s.gpusPerNode)
		}
		if _, ok := res[gpuResource]; ok {
			return nil, fmt.Errorf("--gpus-per-node and %s in --resources-per-node both set the GPUs: use one", gpuResource)
		}
	}
	if s.gpuClaim != "" {
		if err := s.claimGPUsOf(t, res); err != nil {
			return nil, err
		}
	} else if s.gpusPerNode != nil {
		if res == nil {
			res = corev1.ResourceList{}
		}
		res[gpuResource] = *resource.NewQuantity(*s.gpusPerNode, resource.DecimalSI)
	}
	if s.image == "" && s.command == nil && s.nodes == nil && env == nil && res == nil {
		return t, nil
	}
	if t == nil {
		t = &trainer.Trainer{}
	}
	if s.image != "" {
		t.Image = ptr.To(s.image)
	}
	if s.command != nil {
		t.Command = s.command
	}
	if s.nodes != nil {
		t.NumNodes = s.nodes
	}
	t.Env = mergedEnv(t.Env, env)
	if res != nil {
		// Requests and limits alike, as the Kubeflow SDK's resources_per_node does: GPUs need both equal.
		if t.ResourcesPerNode == nil {
			t.ResourcesPerNode = &corev1.ResourceRequirements{}
		}
		t.ResourcesPerNode.Requests = mergedResources(t.ResourcesPerNode.Requests, res)
		t.ResourcesPerNode.Limits = mergedResources(t.ResourcesPerNode.Limits, res)
	}
	return t, nil
}

// merged is m with the keys of add set to add's values; nil when both are empty.
func merged(m, add map[string]string) map[string]string {
	if len(add) == 0 {
		return m
	}
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, add)
	return m
}

// mergedEnv is env with the variables of add: one of the same name takes its place, the others are appended
// in their order.
func mergedEnv(env, add []corev1.EnvVar) []corev1.EnvVar {
	for _, v := range add {
		i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == v.Name })
		if i < 0 {
			env = append(env, v)
			continue
		}
		env[i] = v
	}
	return env
}

// mergedResources is a copy of list with the quantities of add.
func mergedResources(list, add corev1.ResourceList) corev1.ResourceList {
	out := list.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range add {
		out[name] = q.DeepCopy()
	}
	return out
}

// parseResources parses cpu=4,memory=16Gi,nvidia.com/gpu=8.
func parseResources(value string) (corev1.ResourceList, error) {
	if value == "" {
		return nil, nil
	}
	bad := func(what string) error {
		return fmt.Errorf("invalid --resources-per-node %q: %s; write it as %s", value, what, resourcesExample)
	}
	res := corev1.ResourceList{}
	for item := range strings.SplitSeq(value, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || k == "" || v == "" {
			return nil, bad(fmt.Sprintf("%q is not NAME=QUANTITY", item))
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, bad(fmt.Sprintf("%q is not a resource name", k))
		}
		if _, dup := res[corev1.ResourceName(k)]; dup {
			return nil, bad(fmt.Sprintf("%s is given twice", k))
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, bad(fmt.Sprintf("%s=%s: %q is not a quantity", k, v, v))
		}
		if q.Sign() < 0 {
			return nil, bad(fmt.Sprintf("%s=%s is negative", k, v))
		}
		res[corev1.ResourceName(k)] = q
	}
	return res, nil
}

// envVars parses repeated --env NAME=VALUE, keeping their order.
func envVars(values []string) ([]corev1.EnvVar, error) {
	var env []corev1.EnvVar
	seen := map[string]bool{}
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid --env %q: write it as NAME=VALUE, e.g. --env NCCL_DEBUG=INFO", v)
		}
		if errs := validation.IsEnvVarName(k); len(errs) > 0 {
			return nil, fmt.Errorf("invalid --env %q: %s", v, strings.Join(errs, "; "))
		}
		if seen[k] {
			return nil, fmt.Errorf("invalid --env: %s is given twice", k)
		}
		seen[k] = true
		env = append(env, corev1.EnvVar{Name: k, Value: val})
	}
	return env, nil
}

// keyValues parses repeated --label or --annotation KEY=VALUE.
func keyValues(flag string, values []string, isLabel bool) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return nil, fmt.Errorf("invalid %s %q: write it as KEY=VALUE, e.g. %s team=vision", flag, v, flag)
		}
		errs := validation.IsQualifiedName(k)
		if isLabel {
			errs = append(errs, validation.IsValidLabelValue(val)...)
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("invalid %s %q: %s", flag, v, strings.Join(errs, "; "))
		}
		m[k] = val
	}
	return m, nil
}

// checkURI applies the API's rule for storageUri, so the error comes before anything is sent.
func checkURI(flag, uri string) error {
	scheme, rest, ok := strings.Cut(uri, "://")
	valid := ok && rest != "" && scheme != "" && isScheme(scheme)
	if !valid {
		return fmt.Errorf("invalid %s %q: use a URI with a scheme, e.g. hf://tatsu-lab/alpaca or s3://bucket/path", flag, uri)
	}
	return nil
}

func isScheme(s string) bool {
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if i == 0 && !letter || !letter && !(r >= '0' && r <= '9') && !strings.ContainsRune("+.-", r) {
			return false
		}
	}
	return true
}
