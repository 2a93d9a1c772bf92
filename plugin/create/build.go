package create

import (
	"fmt"
	"strings"

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

// spec is what the flags say about the TrainJob to create.
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
	suspend          bool
	labels           []string
	annotations      []string
	queue            string
	gpuType          string
	command          []string
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
	if len(validation.IsDNS1035Label(s.name)) > 0 {
		return nil, fmt.Errorf("invalid TrainJob name %q: use at most 63 lower case letters, digits and '-', starting with a letter and ending with a letter or digit", s.name)
	}
	if s.runtime == "" {
		return nil, fmt.Errorf("--runtime is required: name a ClusterTrainingRuntime, or %sNAME; list runtimes with: kubectl trainjob runtimes", completion.RuntimeKindPrefix)
	}
	ref, err := runtimeRef(s.runtime)
	if err != nil {
		return nil, err
	}
	tj := &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace},
		Spec:       trainer.TrainJobSpec{RuntimeRef: ref},
	}
	if tj.Labels, err = keyValues("--label", s.labels, true); err != nil {
		return nil, err
	}
	if s.queue != "" {
		if errs := validation.IsValidLabelValue(s.queue); len(errs) > 0 {
			return nil, fmt.Errorf("invalid --queue %q: %s", s.queue, strings.Join(errs, "; "))
		}
		if tj.Labels == nil {
			tj.Labels = map[string]string{}
		}
		tj.Labels[kueue.QueueLabel] = s.queue
	}
	if errs := validation.IsValidLabelValue(s.gpuType); len(errs) > 0 {
		return nil, fmt.Errorf("invalid --gpu-type %q: %s; give a value of the nodes' label %s, e.g. NVIDIA-A100-SXM4-80GB", s.gpuType, strings.Join(errs, "; "), completion.GPUProductLabel)
	}
	if tj.Annotations, err = keyValues("--annotation", s.annotations, false); err != nil {
		return nil, err
	}
	if s.suspend {
		tj.Spec.Suspend = ptr.To(true)
	}
	if s.datasetURI != "" || s.modelURI != "" {
		tj.Spec.Initializer = &trainer.Initializer{}
		if s.datasetURI != "" {
			if err := checkURI("--dataset-uri", s.datasetURI); err != nil {
				return nil, err
			}
			tj.Spec.Initializer.Dataset = &trainer.DatasetInitializer{StorageUri: ptr.To(s.datasetURI)}
		}
		if s.modelURI != "" {
			if err := checkURI("--model-uri", s.modelURI); err != nil {
				return nil, err
			}
			tj.Spec.Initializer.Model = &trainer.ModelInitializer{StorageUri: ptr.To(s.modelURI)}
		}
	}
	t, err := s.trainer()
	if err != nil {
		return nil, err
	}
	tj.Spec.Trainer = t
	return tj, nil
}

// trainer is spec.trainer, nil when no flag sets any of it.
func (s *spec) trainer() (*trainer.Trainer, error) {
	t := &trainer.Trainer{Command: s.command, NumNodes: s.nodes}
	if s.image != "" {
		t.Image = ptr.To(s.image)
	}
	if s.nodes != nil && *s.nodes < 0 {
		return nil, fmt.Errorf("invalid --nodes %d: use 1 or more", *s.nodes)
	}
	env, err := envVars(s.env)
	if err != nil {
		return nil, err
	}
	t.Env = env
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
		if res == nil {
			res = corev1.ResourceList{}
		}
		res[gpuResource] = *resource.NewQuantity(*s.gpusPerNode, resource.DecimalSI)
	}
	if res != nil {
		// Requests and limits alike, as the Kubeflow SDK's resources_per_node does: GPUs need both equal.
		t.ResourcesPerNode = &corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}
	}
	if t.Image == nil && t.Command == nil && t.NumNodes == nil && t.Env == nil && t.ResourcesPerNode == nil {
		return nil, nil
	}
	return t, nil
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
