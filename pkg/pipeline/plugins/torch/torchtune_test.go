package torch

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
)

// torchtuneRuntime is the shipped torchtune-llama3.2-1b runtime with the
// `node` container's resources given in YAML flow style.
func torchtuneRuntime(t testing.TB, resources string) *pipeline.Runtime {
	t.Helper()
	return pipelinetest.Runtime(t, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torchtune-llama3.2-1b
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      replicatedJobs:
      - name: dataset-initializer
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
          spec:
            template:
              spec:
                containers:
                - name: dataset-initializer
                  image: ghcr.io/kubeflow/trainer/dataset-initializer
                  env: [{name: STORAGE_URI, value: "hf://tatsu-lab/alpaca"}]
      - name: model-initializer
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: model-initializer
          spec:
            template:
              spec:
                containers:
                - name: model-initializer
                  image: ghcr.io/kubeflow/trainer/model-initializer
                  env: [{name: STORAGE_URI, value: "hf://meta-llama/Llama-3.2-1B-Instruct"}]
      - name: node
        dependsOn:
        - {name: dataset-initializer, status: Complete}
        - {name: model-initializer, status: Complete}
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: trainer
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: ghcr.io/kubeflow/trainer/torchtune-trainer
                  command:
                  - tune
                  - run
                  - --rdzv_endpoint=localhost:29500
                  - full_finetune_distributed
                  - --config
                  - llama3_2/1B_full
                  - dataset=torchtune.datasets.instruct_dataset
                  - dataset.source=parquet
                  - dataset.data_dir=/workspace/dataset/data
                  - output_dir=/workspace/output
                  - tokenizer.path=/workspace/model/original/tokenizer.model
                  - checkpointer.checkpoint_dir=/workspace/model
                  resources: %s
`, resources))
}

const twoGPUs = `{limits: {nvidia.com/gpu: "2"}}`

// runtimeOverrides are the immutable configs of torchtuneRuntime's command.
var runtimeOverrides = []string{
	"output_dir=/workspace/output",
	"tokenizer.path=/workspace/model/original/tokenizer.model",
	"checkpointer.checkpoint_dir=/workspace/model",
}

const rdzv = "--rdzv_endpoint=alpha-node-0-0.alpha:29500"

func TestTorchTuneCommand(t *testing.T) {
	const (
		lora     = "model.lora_attn_modules=[q_proj,v_proj]"
		quantize = "model.quantize_base=True"
		dora     = "model.use_dora=True"
	)
	cases := []struct {
		name       string
		runtime    *pipeline.Runtime
		runtimeRef string
		trainer    string
		want       []string
	}{
		{
			name:    "two GPUs from the runtime: full distributed, with rendezvous",
			runtime: torchtuneRuntime(t, twoGPUs),
			trainer: `{command: [tune, run]}`,
			want:    concat([]string{"tune", "run", rdzv, "full_finetune_distributed", "--config", "llama3_2/1B_full"}, runtimeOverrides),
		},
		{
			name:    "one GPU per node: full single device, no rendezvous",
			runtime: torchtuneRuntime(t, twoGPUs),
			trainer: `{command: [tune, run], resourcesPerNode: {limits: {nvidia.com/gpu: "1"}}}`,
			want:    concat([]string{"tune", "run", "full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"}, runtimeOverrides),
		},
		{
			name:    "numProcPerNode 1 on two GPUs: full single device, no rendezvous",
			runtime: torchtuneRuntime(t, twoGPUs),
			trainer: `{command: [tune, run], numProcPerNode: 1}`,
			want:    concat([]string{"tune", "run", "full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"}, runtimeOverrides),
		},
		{
			name:    "numProcPerNode 4 on CPUs: full distributed, with rendezvous",
			runtime: torchtuneRuntime(t, `{requests: {cpu: "8"}}`),
			trainer: `{command: [tune, run], numProcPerNode: 4}`,
			want:    concat([]string{"tune", "run", rdzv, "full_finetune_distributed", "--config", "llama3_2/1B_full"}, runtimeOverrides),
		},
		{
			name:    "LoRA on one GPU",
			runtime: torchtuneRuntime(t, `{limits: {nvidia.com/gpu: "1"}}`),
			trainer: `{command: [tune, run], args: ["` + lora + `"]}`,
			want:    concat([]string{"tune", "run", "lora_finetune_single_device", "--config", "llama3_2/1B_lora_single_device"}, runtimeOverrides),
		},
		{
			name:    "QLoRA on one GPU",
			runtime: torchtuneRuntime(t, `{limits: {nvidia.com/gpu: "1"}}`),
			trainer: `{command: [tune, run], args: ["` + lora + `", ` + quantize + `]}`,
			want:    concat([]string{"tune", "run", "lora_finetune_single_device", "--config", "llama3_2/1B_qlora_single_device"}, runtimeOverrides),
		},
		{
			name:    "DoRA on one GPU is a LoRA recipe",
			runtime: torchtuneRuntime(t, `{limits: {nvidia.com/gpu: "1"}}`),
			trainer: `{command: [tune, run], args: ["` + lora + `", ` + dora + `]}`,
			want:    concat([]string{"tune", "run", "lora_finetune_single_device", "--config", "llama3_2/1B_lora_single_device"}, runtimeOverrides),
		},
		{
			name:    "quantized DoRA is DoRA, not QLoRA",
			runtime: torchtuneRuntime(t, `{limits: {nvidia.com/gpu: "1"}}`),
			trainer: `{command: [tune, run], args: ["` + lora + `", ` + quantize + `, ` + dora + `]}`,
			want:    concat([]string{"tune", "run", "lora_finetune_single_device", "--config", "llama3_2/1B_lora_single_device"}, runtimeOverrides),
		},
		{
			name:    "quantize_base=False is not QLoRA",
			runtime: torchtuneRuntime(t, `{limits: {nvidia.com/gpu: "1"}}`),
			trainer: `{command: [tune, run], args: ["` + lora + `", model.quantize_base=False]}`,
			want:    concat([]string{"tune", "run", "lora_finetune_single_device", "--config", "llama3_2/1B_lora_single_device"}, runtimeOverrides),
		},
		{
			name:    "LoRA on two GPUs",
			runtime: torchtuneRuntime(t, twoGPUs),
			trainer: `{command: [tune, run], args: ["` + lora + `"]}`,
			want:    concat([]string{"tune", "run", rdzv, "lora_finetune_distributed", "--config", "llama3_2/1B_lora"}, runtimeOverrides),
		},
		{
			name:    "QLoRA on two GPUs",
			runtime: torchtuneRuntime(t, twoGPUs),
			trainer: `{command: [tune, run], args: ["` + lora + `", ` + quantize + `]}`,
			want:    concat([]string{"tune", "run", rdzv, "lora_finetune_distributed", "--config", "llama3_2/1B_qlora"}, runtimeOverrides),
		},
		{
			name:    "DoRA on two GPUs",
			runtime: torchtuneRuntime(t, twoGPUs),
			trainer: `{command: [tune, run], args: ["` + lora + `", ` + dora + `]}`,
			want:    concat([]string{"tune", "run", rdzv, "lora_finetune_distributed", "--config", "llama3_2/1B_lora"}, runtimeOverrides),
		},
		{
			name:       "three nodes of llama3.3 70B: full multi-node, with rendezvous",
			runtime:    torchtuneRuntime(t, `{limits: {nvidia.com/gpu: "8"}}`),
			runtimeRef: "torchtune-llama3.3-70b",
			trainer:    `{command: [tune, run], numNodes: 3}`,
			want:       concat([]string{"tune", "run", rdzv, "full_finetune_distributed", "--config", "llama3_3/70B_full_multinode"}, runtimeOverrides),
		},
		{
			name:       "three single-GPU nodes: still multi-node, with rendezvous",
			runtime:    torchtuneRuntime(t, `{limits: {nvidia.com/gpu: "1"}}`),
			runtimeRef: "torchtune-llama3.3-70b",
			trainer:    `{command: [tune, run], numNodes: 3}`,
			want:       concat([]string{"tune", "run", rdzv, "full_finetune_distributed", "--config", "llama3_3/70B_full_multinode"}, runtimeOverrides),
		},
		{
			name: "qwen: the runtime's tokenizer.merges_file is carried, its other configs are not",
			runtime: trainerRuntime(t, `{torch: {}}`, `{name: node, image: ghcr.io/kubeflow/trainer/torchtune-trainer,
                  resources: {limits: {nvidia.com/gpu: "2"}},
                  command: [tune, run, full_finetune_distributed, --config, qwen2_5/1.5B_full, epochs=3,
                    output_dir=/workspace/output, tokenizer.path=/workspace/model/vocab.json,
                    tokenizer.merges_file=/workspace/model/merges.txt, checkpointer.checkpoint_dir=/workspace/model]}`),
			runtimeRef: "torchtune-qwen2.5-1.5b",
			trainer:    `{command: [tune, run]}`,
			want: []string{"tune", "run", rdzv, "full_finetune_distributed", "--config", "qwen2_5/1.5B_full",
				"output_dir=/workspace/output", "tokenizer.path=/workspace/model/vocab.json",
				"tokenizer.merges_file=/workspace/model/merges.txt", "checkpointer.checkpoint_dir=/workspace/model"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ref := tc.runtimeRef
			if ref == "" {
				ref = "torchtune-llama3.2-1b"
			}
			info, err := enforce(t, tc.runtime, pipelinetest.TrainJobOn(t, ref, tc.trainer))
			if err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			got := trainerResultOf(t, info)
			if diff := cmp.Diff(tc.want, got.Command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
			// Args are the TrainJob's, after the command, as config overrides.
			if diff := cmp.Diff(pipelinetest.TrainJobOn(t, ref, tc.trainer).Spec.Trainer.Args, got.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

// torchtune takes the rendezvous endpoint on the command line, so the
// trainer gets no PET_MASTER_* variables; the rest is as for torchrun.
func TestTorchTuneEnv(t *testing.T) {
	info, err := enforce(t, torchtuneRuntime(t, twoGPUs),
		pipelinetest.TrainJobOn(t, "torchtune-llama3.2-1b", `{command: [tune, run], numNodes: 1, env: [{name: HF_HOME, value: /workspace/cache}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := trainerResultOf(t, info)
	got.Command = nil
	want := trainerResult{
		Count: 1,
		Env:   []corev1.EnvVar{env("HF_HOME", "/workspace/cache"), env("PET_NNODES", "1"), env("PET_NPROC_PER_NODE", "auto"), nodeRank()},
		Ports: trainerPort,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trainer (-want +got):\n%s", diff)
	}
}

func TestModelOf(t *testing.T) {
	cases := map[string]string{
		"torchtune-llama3.2-1b":  "llama3_2/1B",
		"torchtune-llama3.2-3b":  "llama3_2/3B",
		"torchtune-llama3.3-70b": "llama3_3/70B",
		"torchtune-qwen2.5-1.5b": "qwen2_5/1.5B",
		"torchtune-mistral-7b":   "mistral/7B",
		"torch-distributed":      "",
		"my-torchtune-llama-1b":  "",
		"torchtune--1b":          "",
	}
	for name, want := range cases {
		if got := modelOf(name); got != want {
			t.Errorf("modelOf(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestTorchTuneValidate(t *testing.T) {
	const (
		lora     = "model.lora_attn_modules=[q_proj,v_proj]"
		quantize = "model.quantize_base=True"
	)
	var (
		namePath    = field.NewPath("spec", "runtimeRef", "name")
		trainerPath = field.NewPath("spec", "trainer")
	)
	cases := []struct {
		name       string
		runtime    string // resources of the runtime's node container
		runtimeRef string
		trainer    string
		want       field.ErrorList
	}{
		{
			name:       "shipped runtime as is: valid",
			runtime:    twoGPUs,
			runtimeRef: "torchtune-llama3.2-1b",
			trainer:    `{command: [tune, run], args: [epochs=1]}`,
		},
		{
			name:       "unsupported model",
			runtime:    twoGPUs,
			runtimeRef: "torchtune-mistral-7b",
			trainer:    `{command: [tune, run]}`,
			want: field.ErrorList{field.Invalid(namePath, "torchtune-mistral-7b",
				"must have a supported pretrained model, invalid model configured: mistral/7B")},
		},
		{
			name:       "runtime name without a model",
			runtime:    twoGPUs,
			runtimeRef: "my-tune",
			trainer:    `{command: [tune, run]}`,
			want: field.ErrorList{field.Invalid(namePath, "my-tune",
				"must have a supported pretrained model, invalid model configured: ")},
		},
		{
			name:       "two nodes of llama3.2 1B",
			runtime:    twoGPUs,
			runtimeRef: "torchtune-llama3.2-1b",
			trainer:    `{command: [tune, run], numNodes: 2}`,
			want:       field.ErrorList{field.Invalid(trainerPath.Child("numNodes"), int32(2), "must be 1 for llama3_2/1B model")},
		},
		{
			name:       "two nodes of llama3.3 70B: valid",
			runtime:    twoGPUs,
			runtimeRef: "torchtune-llama3.3-70b",
			trainer:    `{command: [tune, run], numNodes: 2}`,
		},
		{
			name:       "LoRA on two nodes of llama3.3 70B",
			runtime:    twoGPUs,
			runtimeRef: "torchtune-llama3.3-70b",
			trainer:    `{command: [tune, run], numNodes: 2, args: ["` + lora + `"]}`,
			want: field.ErrorList{field.Invalid(trainerPath.Child("numNodes"), int32(2),
				"LoRA fine-tuning is not supported for multi-node training in TorchTune")},
		},
		{
			name:       "QLoRA on one GPU of llama3.2 1B: valid",
			runtime:    `{limits: {nvidia.com/gpu: "1"}}`,
			runtimeRef: "torchtune-llama3.2-1b",
			trainer:    `{command: [tune, run], args: ["` + lora + `", ` + quantize + `]}`,
		},
		{
			name:       "QLoRA on two GPUs of llama3.2 1B (from the runtime's GPUs)",
			runtime:    twoGPUs,
			runtimeRef: "torchtune-llama3.2-1b",
			trainer:    `{command: [tune, run], args: ["` + lora + `", ` + quantize + `]}`,
			want: field.ErrorList{
				field.Invalid(trainerPath.Child("numProcPerNode"), "auto", "must be auto or 1 for llama3_2/1B model when using QLoRA"),
				field.Invalid(trainerPath.Child("resourcesPerNode"), (*corev1.ResourceRequirements)(nil),
					"must have gpu resource with value 1 for llama3_2/1B model when using QLoRA"),
			},
		},
		{
			name:       "QLoRA with numProcPerNode 2 on llama3.2 3B",
			runtime:    twoGPUs,
			runtimeRef: "torchtune-llama3.2-3b",
			trainer:    `{command: [tune, run], numProcPerNode: 2, args: ["` + lora + `", ` + quantize + `]}`,
			want: field.ErrorList{
				field.Invalid(trainerPath.Child("numProcPerNode"), int32(2), "must be auto or 1 for llama3_2/3B model when using QLoRA"),
				field.Invalid(trainerPath.Child("resourcesPerNode"), (*corev1.ResourceRequirements)(nil),
					"must have gpu resource with value 1 for llama3_2/3B model when using QLoRA"),
			},
		},
		{
			name:       "QLoRA on qwen, one GPU",
			runtime:    `{limits: {nvidia.com/gpu: "1"}}`,
			runtimeRef: "torchtune-qwen2.5-1.5b",
			trainer:    `{command: [tune, run], args: ["` + lora + `", ` + quantize + `]}`,
			want:       field.ErrorList{field.Invalid(namePath, "torchtune-qwen2.5-1.5b", "QLoRA is not supported for qwen2_5/1.5B model")},
		},
		{
			name:       "QLoRA on qwen, two GPUs",
			runtime:    twoGPUs,
			runtimeRef: "torchtune-qwen2.5-1.5b",
			trainer:    `{command: [tune, run], args: ["` + lora + `", ` + quantize + `]}`,
			want:       field.ErrorList{field.Invalid(namePath, "torchtune-qwen2.5-1.5b", "QLoRA is not supported for qwen2_5/1.5B model")},
		},
		{
			name:       "args that set the runtime's immutable configs",
			runtime:    twoGPUs,
			runtimeRef: "torchtune-llama3.2-1b",
			trainer:    `{command: [tune, run], args: [output_dir=/tmp/out, epochs=1, tokenizer.merges_file=/tmp/m, checkpointer.checkpoint_dir=/tmp/c, tokenizer.path=/tmp/t]}`,
			want: field.ErrorList{
				field.Invalid(trainerPath.Child("args").Index(0), "output_dir=/tmp/out",
					`must not set immutable config "output_dir" in trainer args; it is managed by the runtime`),
				field.Invalid(trainerPath.Child("args").Index(2), "tokenizer.merges_file=/tmp/m",
					`must not set immutable config "tokenizer.merges_file" in trainer args; it is managed by the runtime`),
				field.Invalid(trainerPath.Child("args").Index(3), "checkpointer.checkpoint_dir=/tmp/c",
					`must not set immutable config "checkpointer.checkpoint_dir" in trainer args; it is managed by the runtime`),
				field.Invalid(trainerPath.Child("args").Index(4), "tokenizer.path=/tmp/t",
					`must not set immutable config "tokenizer.path" in trainer args; it is managed by the runtime`),
			},
		},
		{
			name:       "torchrun TrainJob: torchtune rules do not apply",
			runtime:    twoGPUs,
			runtimeRef: "my-tune",
			trainer:    `{command: [torchrun, train.py], numNodes: 4, args: [output_dir=/tmp/out]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := validate(t, torchtuneRuntime(t, tc.runtime), pipelinetest.TrainJobOn(t, tc.runtimeRef, tc.trainer))
			if diff := cmp.Diff(tc.want, got, quantityEqual); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
