// Package torch is the Torch plugin of the Pipeline Framework: for runtimes
// with mlPolicy.torch it settles the trainer's node count and processes per
// node, gives torchrun its PET_* environment (spec §2.6), rewrites the
// command of torchtune TrainJobs, and rejects TrainJobs that would clash
// with what it injects. It only edits the RuntimeInfo it is given: never the
// TrainJob, and never the cluster.
package torch

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Name is the plugin's name in the registry.
const Name = "Torch"

// The torchrun environment (torch.distributed.run reads PET_<FLAG> for each
// of its flags). Users must not set these in spec.trainer.env.
const (
	EnvNumNodes       = "PET_NNODES"
	EnvNumProcPerNode = "PET_NPROC_PER_NODE"
	EnvNodeRank       = "PET_NODE_RANK"
	EnvMasterAddr     = "PET_MASTER_ADDR"
	EnvMasterPort     = "PET_MASTER_PORT"
)

// reservedEnvs are the PET_* names in sorted order, so that the validation
// message lists them in a stable order.
var reservedEnvs = [...]string{EnvMasterAddr, EnvMasterPort, EnvNumNodes, EnvNodeRank, EnvNumProcPerNode}

// masterPort is trainer.ContainerTrainerPort as text.
var masterPort = strconv.Itoa(trainer.ContainerTrainerPort)

// Torch implements the torch ML policy.
type Torch struct{}

var (
	_ pipeline.EnforceMLPolicyPlugin  = (*Torch)(nil)
	_ pipeline.CustomValidationPlugin = (*Torch)(nil)
)

// New builds the Torch plugin. It needs nothing from the Handle.
func New(context.Context, pipeline.Handle) (pipeline.Plugin, error) {
	return &Torch{}, nil
}

// Name returns Name.
func (*Torch) Name() string { return Name }

// EnforceMLPolicy applies mlPolicy.torch to the pod sets (spec §2.6):
//   - the trainer pod set's count becomes spec.trainer.numNodes when set;
//   - when spec.trainer is set, the trainer's `node` container gets the
//     TrainJob env, then PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK and,
//     except for torchtune, PET_MASTER_ADDR and PET_MASTER_PORT, plus port
//     29500; for torchtune its command is rewritten instead (see
//     torchtuneCommand);
//   - every envInjection target container gets all five PET_* variables.
//
// It does nothing for runtimes without mlPolicy.torch.
func (*Torch) EnforceMLPolicy(info *pipeline.RuntimeInfo, tj *trainer.TrainJob) error {
	policy := torchPolicy(info)
	if policy == nil {
		return nil
	}
	// Check every target before changing anything, so a failed build leaves
	// the RuntimeInfo as it found it.
	for job, container := range missingTargets(info, policy.EnvInjection) {
		return fmt.Errorf(errTargetNotFound, job, container)
	}

	jt := tj.Spec.Trainer
	ps := info.TrainerPodSet()
	nodes := numNodes(info, ps, jt)
	if ps != nil {
		ps.Count = nodes
	}
	res, _ := info.TrainerResources()
	nproc, gpus := settleNumProcPerNode(jt, res, info.TrainerGPUs())
	addr := masterAddr(info, ps, tj)

	if c := ps.Container(trainer.Node); jt != nil && c != nil {
		env := petEnv(nodes, nproc, addr)
		pet := env[:]
		if isTorchTune(jt) {
			pet = env[:3]
			// Torch settles the whole entrypoint here, `tune run` included, and
			// the args as the JobSet builder would (replaced when set): the
			// builder must not copy spec.trainer.command or args over them.
			c.Command = torchtuneCommand(c.Command, tj, addr, nodes, nproc, gpus)
			if len(jt.Args) > 0 {
				c.Args = slices.Clone(jt.Args)
			}
			ps.EntrypointSetBy = Name
		}
		c.Env = slices.Grow(c.Env, len(jt.Env)+len(pet))
		pipeline.UpsertEnv(c, jt.Env...)
		pipeline.UpsertEnv(c, pet...)
		pipeline.UpsertPort(c, corev1.ContainerPort{ContainerPort: trainer.ContainerTrainerPort, Protocol: corev1.ProtocolTCP})
	}

	if t := policy.EnvInjection; t != nil {
		for _, target := range t.Targets {
			tps := info.PodSet(target.JobName)
			for _, name := range target.ContainerNames {
				c := tps.AnyContainer(name)
				c.Env = slices.Grow(c.Env, len(reservedEnvs))
				// Targets always get the master address, torchtune or not:
				// they run beside the trainer, not through `tune run`.
				env := petEnv(nodes, nproc, addr)
				pipeline.UpsertEnv(c, env[:]...)
			}
		}
	}
	return nil
}

// Validate rejects, at admission, TrainJobs the policy cannot run (spec
// §2.6): envInjection targets missing from the runtime, reserved PET_* envs
// in spec.trainer.env, and torchtune settings the recipes do not support.
func (*Torch) Validate(_ context.Context, info *pipeline.RuntimeInfo, _, newObj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	policy := torchPolicy(info)
	if policy == nil {
		return nil, nil
	}
	var errs field.ErrorList
	for job, container := range missingTargets(info, policy.EnvInjection) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "runtimeRef"), newObj.Spec.RuntimeRef.Name,
			fmt.Sprintf(errTargetNotFound, job, container)))
	}
	jt := newObj.Spec.Trainer
	if jt == nil {
		return nil, errs
	}
	if names := reservedEnvsIn(jt.Env); len(names) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "trainer", "env"), jt.Env,
			fmt.Sprintf("must not have reserved envs, invalid envs configured: %v", names)))
	}
	if isTorchTune(jt) {
		errs = append(errs, validateTorchTune(info, newObj)...)
	}
	return nil, errs
}

func torchPolicy(info *pipeline.RuntimeInfo) *trainer.TorchMLPolicySource {
	if info == nil {
		return nil
	}
	if src := info.MLPolicySource(); src != nil {
		return src.Torch
	}
	return nil
}

const errTargetNotFound = "envInjection target podSet %q container %q not found in runtime template"

// missingTargets yields each envInjection target, as (job, container), that
// the runtime template lacks as regular or init container.
func missingTargets(info *pipeline.RuntimeInfo, inj *trainer.EnvInjection) iter.Seq2[string, string] {
	return func(yield func(job, container string) bool) {
		if inj == nil {
			return
		}
		for _, t := range inj.Targets {
			ps := info.PodSet(t.JobName)
			for _, name := range t.ContainerNames {
				if ps.AnyContainer(name) == nil && !yield(t.JobName, name) {
					return
				}
			}
		}
	}
}

func reservedEnvsIn(envs []corev1.EnvVar) []string {
	var names []string
	for _, r := range reservedEnvs {
		for _, e := range envs {
			if e.Name == r {
				names = append(names, r)
				break
			}
		}
	}
	return names
}

// numNodes is the number of trainer nodes: spec.trainer.numNodes, else the
// trainer pod set's count (the runtime's mlPolicy.numNodes), else, for a
// runtime without a trainer step, mlPolicy.numNodes or 1.
func numNodes(info *pipeline.RuntimeInfo, ps *pipeline.PodSet, jt *trainer.Trainer) int32 {
	switch {
	case jt != nil && jt.NumNodes != nil:
		return *jt.NumNodes
	case ps != nil:
		return ps.Count
	case info.RuntimePolicy.MLPolicy.NumNodes != nil:
		return *info.RuntimePolicy.MLPolicy.NumNodes
	}
	return 1
}

// numProcPerNode is torchrun's --nproc-per-node: a number of processes, or
// auto (0), which torchrun resolves to one process per GPU.
type numProcPerNode int32

const auto numProcPerNode = 0

func (n numProcPerNode) String() string {
	if n == auto {
		return "auto"
	}
	return strconv.Itoa(int(n))
}

// settleNumProcPerNode returns the processes per node and the GPUs per node
// of the trainer, from spec.trainer.numProcPerNode, the trainer's GPUs and
// the resources of the trainer's `node` container. Those are the runtime's
// resources with resourcesPerNode already merged, so a GPU the runtime
// requests still counts when the TrainJob only sets CPU (upstream reads the
// TrainJob's resourcesPerNode alone, spec §3.9, and falls back to the CPU
// count).
//
// Unset means auto; auto without GPUs becomes the CPU count rounded up (the
// request, or the limit when the request is unset or zero), at least 1,
// since torchrun's auto would otherwise start one process per host CPU, not
// per CPU the pod may use.
func settleNumProcPerNode(jt *trainer.Trainer, res corev1.ResourceRequirements, gpus int64) (numProcPerNode, int64) {
	// The API rejects values below 1; treat such a value like unset rather
	// than print a meaningless PET_NPROC_PER_NODE where nothing validated it.
	if jt != nil && jt.NumProcPerNode != nil && *jt.NumProcPerNode >= 1 {
		return numProcPerNode(*jt.NumProcPerNode), gpus
	}
	if gpus > 0 {
		return auto, gpus
	}
	return numProcPerNode(cpusPerNode(res)), gpus
}

// cpusPerNode is the CPU request, or limit when the request is unset or
// zero, rounded up, at least 1.
func cpusPerNode(res corev1.ResourceRequirements) int32 {
	q, ok := res.Requests[corev1.ResourceCPU]
	if !ok || q.IsZero() {
		q = res.Limits[corev1.ResourceCPU]
	}
	// Value rounds up: 2500m is 3.
	return int32(min(max(q.Value(), 1), 1<<31-1))
}

// masterAddr is the DNS name of the first trainer pod, where torchrun's
// rendezvous runs; without a trainer pod set, that of the `node` job.
func masterAddr(info *pipeline.RuntimeInfo, ps *pipeline.PodSet, tj *trainer.TrainJob) string {
	rjob := trainer.Node
	if ps != nil {
		rjob = ps.Name
	}
	return info.FirstEndpoint(tj, rjob)
}

// petEnv are the five PET_* variables: the first three are what every
// torch process needs, the last two the rendezvous address of node 0, which
// torchtune takes as --rdzv_endpoint instead. An array, so that it stays on
// the stack.
func petEnv(nodes int32, nproc numProcPerNode, addr string) [5]corev1.EnvVar {
	return [...]corev1.EnvVar{
		{Name: EnvNumNodes, Value: strconv.Itoa(int(nodes))},
		{Name: EnvNumProcPerNode, Value: nproc.String()},
		pipeline.CompletionIndexEnv(EnvNodeRank),
		{Name: EnvMasterAddr, Value: addr},
		{Name: EnvMasterPort, Value: masterPort},
	}
}
