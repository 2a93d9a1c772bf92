package torch

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// torchtune (LLM fine-tuning recipes on top of torchrun) is selected by the
// TrainJob command `tune run`; the plugin then picks the recipe and config
// from the node count, processes, GPUs and the LoRA settings in the args.

// torchtuneEntrypoint is the spec.trainer.command that selects torchtune.
var torchtuneEntrypoint = [...]string{"tune", "run"}

// Recipes and the suffixes of their configs, e.g. llama3_2/1B + _lora.
const (
	recipeFullSingleDevice = "full_finetune_single_device"
	recipeFullDistributed  = "full_finetune_distributed"
	recipeLoRASingleDevice = "lora_finetune_single_device"
	recipeLoRADistributed  = "lora_finetune_distributed"

	configFullSingleDevice  = "_full_single_device"
	configLoRASingleDevice  = "_lora_single_device"
	configQLoRASingleDevice = "_qlora_single_device"
	configFull              = "_full"
	configLoRA              = "_lora"
	configQLoRA             = "_qlora"
	configFullMultiNode     = "_full_multinode"
)

// Config overrides in args that select LoRA, QLoRA and DoRA.
const (
	argLoRAAttnModules = "model.lora_attn_modules"
	argQuantizeBase    = "model.quantize_base"
	argUseDoRA         = "model.use_dora"
)

// Pretrained models the torchtune runtimes ship, named as torchtune names
// its configs.
const (
	modelLlama3_2_1B  = "llama3_2/1B"
	modelLlama3_2_3B  = "llama3_2/3B"
	modelLlama3_3_70B = "llama3_3/70B"
	modelQwen2_5_1_5B = "qwen2_5/1.5B"
)

var supportedModels = [...]string{modelLlama3_2_1B, modelLlama3_2_3B, modelLlama3_3_70B, modelQwen2_5_1_5B}

// immutableConfigs are the config keys the runtime fixes in its `node`
// command (where the initializers put the model, where output goes). The
// plugin carries them into the rewritten command; users may not set them.
var immutableConfigs = [...]string{"output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file"}

func isTorchTune(jt *trainer.Trainer) bool {
	return jt != nil && slices.Equal(jt.Command, torchtuneEntrypoint[:])
}

// torchtuneCommand is the trainer command for torchtune: `tune run`, the
// rendezvous endpoint when more than one process takes part, the recipe and
// its config, then the runtime's immutable config overrides, found in
// runtimeCommand (the runtime's `node` command); addr is node 0's address.
// The TrainJob's args follow
// as container args and override the config further.
func torchtuneCommand(runtimeCommand []string, tj *trainer.TrainJob, addr string, nodes int32, nproc numProcPerNode, gpus int64) []string {
	jt := tj.Spec.Trainer
	recipe, config := torchtuneRecipe(nodes, nproc, gpus, jt.Args)
	cmd := make([]string, 0, len(jt.Command)+4+len(immutableConfigs))
	cmd = append(cmd, jt.Command...)
	if nodes > 1 || nproc > 1 || (nproc == auto && gpus > 1) {
		cmd = append(cmd, "--rdzv_endpoint="+addr+":"+masterPort)
	}
	cmd = append(cmd, recipe, "--config", modelOf(tj.Spec.RuntimeRef.Name)+config)
	for _, arg := range runtimeCommand {
		if isImmutableConfig(arg) {
			cmd = append(cmd, arg)
		}
	}
	return cmd
}

// torchtuneRecipe chooses the recipe and config suffix. One device (one
// node with one process or one GPU) gets the single-device recipes; one
// node with more devices the distributed ones; several nodes only full
// fine-tuning. QLoRA is a LoRA recipe with a quantized base model; DoRA is
// LoRA with use_dora, so it never counts as QLoRA.
func torchtuneRecipe(nodes int32, nproc numProcPerNode, gpus int64, args []string) (recipe, configSuffix string) {
	lora, qlora := loraMode(args)
	switch {
	case nodes == 1 && (nproc == 1 || gpus == 1):
		switch {
		case qlora:
			return recipeLoRASingleDevice, configQLoRASingleDevice
		case lora:
			return recipeLoRASingleDevice, configLoRASingleDevice
		}
		return recipeFullSingleDevice, configFullSingleDevice
	case nodes == 1 && qlora:
		return recipeLoRADistributed, configQLoRA
	case nodes == 1 && lora:
		return recipeLoRADistributed, configLoRA
	case nodes > 1:
		return recipeFullDistributed, configFullMultiNode
	}
	return recipeFullDistributed, configFull
}

// loraMode reports whether args enable LoRA (they set the LoRA attention
// modules) and QLoRA (they quantize the base model without DoRA).
func loraMode(args []string) (lora, qlora bool) {
	var quantize, dora bool
	for _, arg := range args {
		key, value, _ := strings.Cut(arg, "=")
		switch key {
		case argLoRAAttnModules:
			lora = true
		case argQuantizeBase:
			quantize = strings.EqualFold(value, "true")
		case argUseDoRA:
			dora = strings.EqualFold(value, "true")
		}
	}
	return lora, quantize && !dora
}

func isImmutableConfig(arg string) bool {
	key, _, _ := strings.Cut(arg, "=")
	return slices.Contains(immutableConfigs[:], key)
}

// modelOf derives the torchtune model from the runtime's name,
// `torchtune-<family><version>-<size>`: torchtune-llama3.2-1b is
// llama3_2/1B. Other names give "".
func modelOf(runtimeName string) string {
	prefix, rest, ok := strings.Cut(runtimeName, "-")
	if !ok || prefix == "" {
		return ""
	}
	family, size, ok := strings.Cut(rest, "-")
	if !ok || family == "" || size == "" || strings.Contains(size, "-") {
		return ""
	}
	return strings.ReplaceAll(family, ".", "_") + "/" + strings.ToUpper(size)
}

// validateTorchTune checks a torchtune TrainJob against what the recipes
// support, with the messages of upstream's webhook.
func validateTorchTune(info *pipeline.RuntimeInfo, tj *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	jt := tj.Spec.Trainer
	trainerPath := field.NewPath("spec", "trainer")
	namePath := field.NewPath("spec", "runtimeRef", "name")
	runtimeName := tj.Spec.RuntimeRef.Name

	model := modelOf(runtimeName)
	if !slices.Contains(supportedModels[:], model) {
		errs = append(errs, field.Invalid(namePath, runtimeName,
			fmt.Sprintf("must have a supported pretrained model, invalid model configured: %v", model)))
	}

	// Judge what the build will do: the runtime's node count unless the
	// TrainJob sets one, the merged resources.
	nodes := numNodes(info, info.TrainerPodSet(), jt)
	res, _ := info.TrainerResources()
	nproc, gpus := settleNumProcPerNode(jt, res, info.TrainerGPUs())

	if nodes > 1 && model != modelLlama3_3_70B {
		errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), nodes, fmt.Sprintf("must be 1 for %v model", model)))
	}
	_, config := torchtuneRecipe(nodes, nproc, gpus, jt.Args)
	if config == configQLoRA || config == configQLoRASingleDevice {
		if model == modelQwen2_5_1_5B {
			errs = append(errs, field.Invalid(namePath, runtimeName, fmt.Sprintf("QLoRA is not supported for %v model", model)))
		}
		if config == configQLoRA && (model == modelLlama3_2_1B || model == modelLlama3_2_3B) {
			var npp any = "auto"
			if jt.NumProcPerNode != nil {
				npp = *jt.NumProcPerNode
			}
			errs = append(errs,
				field.Invalid(trainerPath.Child("numProcPerNode"), npp,
					fmt.Sprintf("must be auto or 1 for %v model when using QLoRA", model)),
				field.Invalid(trainerPath.Child("resourcesPerNode"), jt.ResourcesPerNode,
					fmt.Sprintf("must have gpu resource with value 1 for %v model when using QLoRA", model)))
		}
	}
	if lora, _ := loraMode(jt.Args); nodes > 1 && lora {
		errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), nodes,
			"LoRA fine-tuning is not supported for multi-node training in TorchTune"))
	}
	for i, arg := range jt.Args {
		if isImmutableConfig(arg) {
			key, _, _ := strings.Cut(arg, "=")
			errs = append(errs, field.Invalid(trainerPath.Child("args").Index(i), arg,
				fmt.Sprintf("must not set immutable config %q in trainer args; it is managed by the runtime", key)))
		}
	}
	return errs
}
