package operator_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/integration/operator/internal/optest"
)

// finishes runs a TrainJob of runtime to its end both ways: one whose
// JobSet completes becomes Complete, one whose JobSet fails becomes Failed.
func finishes(t *testing.T, ns, kind, runtime string, trainerSpec *trainer.Trainer) {
	t.Helper()
	for _, end := range []struct {
		name   string
		jobSet jobsetv1alpha2.JobSetConditionType
		want   condition
	}{
		{"complete", jobsetv1alpha2.JobSetCompleted, condition{trainer.TrainJobComplete, "True", "AllJobsCompleted", "jobset completed successfully"}},
		{"failed", jobsetv1alpha2.JobSetFailed, condition{trainer.TrainJobFailed, "True", "FailedJobs", "jobset failed due to one or more job failures"}},
	} {
		tj := newTrainJob(ns, runtime+"-"+end.name, kind, runtime)
		tj.Spec.Trainer = trainerSpec.DeepCopy()
		create(t, tj)
		jobSetOf(t, tj)
		cluster.SetJobSetStatus(t, env.Client, key(tj), optest.Timeout, func(s *jobsetv1alpha2.JobSetStatus) {
			s.Conditions = append(s.Conditions, jobSetCondition(end.jobSet, end.want.Reason, end.want.Message))
		})
		trainJobMatches(t, tj, end.name, hasConditions(componentsCreated, end.want))
	}
}

func volume(rj *jobsetv1alpha2.ReplicatedJob, name string) *corev1.Volume {
	vols := rj.Template.Spec.Template.Spec.Volumes
	if k := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == name }); k >= 0 {
		return &vols[k]
	}
	return nil
}

// TestOpenMPI: the launcher and the nodes get the SSH keys, the launcher
// its hostfile and OpenMPI settings; the key Secret is immutable and the
// hostfile lists every node with its slots.
func TestOpenMPI(t *testing.T) {
	ns := cluster.NewNamespace(t, env.Client, "test-", nil)
	spec := runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{
		NumProcPerNode: ptr.To[int32](8), MPIImplementation: ptr.To(trainer.MPIImplementationOpenMPI),
		SSHAuthMountPath: ptr.To("/root/.ssh"), RunLauncherAsNode: ptr.To(false),
	}}},
		replicatedJob(trainer.Launcher, trainer.AncestorTrainer, trainer.Node),
		replicatedJob(trainer.Node, "", trainer.Node))
	createTrainingRuntime(t, ns, "mpi", spec)
	tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, "mpi")
	create(t, tj)
	js := jobSetOf(t, tj)

	sshVolume := corev1.Volume{Name: "mpi-ssh-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "alpha-mpi-ssh-auth", DefaultMode: ptr.To[int32](0o400),
		Items: []corev1.KeyToPath{
			{Key: "ssh-privatekey", Path: "id_rsa", Mode: ptr.To[int32](0o640)},
			{Key: "ssh-publickey", Path: "id_rsa.pub", Mode: ptr.To[int32](0o644)},
			{Key: "ssh-publickey", Path: "authorized_keys", Mode: ptr.To[int32](0o644)},
		},
	}}}
	hostfileVolume := corev1.Volume{Name: "mpi-hostfile", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "alpha-mpi-hostfile"},
		Items:                []corev1.KeyToPath{{Key: "hostfile", Path: "hostfile", Mode: ptr.To[int32](0o444)}},
	}}}
	launcher, node := findJob(&js.Spec, trainer.Launcher), findJob(&js.Spec, trainer.Node)
	got := map[string]any{
		"launcherVolumes": launcher.Template.Spec.Template.Spec.Volumes,
		"launcherMounts":  container(launcher, trainer.Node).VolumeMounts,
		"launcherEnv":     container(launcher, trainer.Node).Env,
		"nodeVolumes":     node.Template.Spec.Template.Spec.Volumes,
		"nodeMounts":      container(node, trainer.Node).VolumeMounts,
		"nodeCount":       ptr.Deref(node.Template.Spec.Parallelism, 0),
	}
	want := map[string]any{
		"launcherVolumes": []corev1.Volume{sshVolume, hostfileVolume},
		"launcherMounts":  []corev1.VolumeMount{{Name: "mpi-ssh-auth", MountPath: "/root/.ssh"}, {Name: "mpi-hostfile", MountPath: "/etc/mpi"}},
		"launcherEnv": []corev1.EnvVar{
			{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
			{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
			{Name: "OMPI_MCA_orte_set_default_slots", Value: "8"},
			{Name: "OMPI_MCA_plm_rsh_args", Value: "-o ConnectionAttempts=10"},
		},
		"nodeVolumes": []corev1.Volume{sshVolume},
		"nodeMounts":  []corev1.VolumeMount{{Name: "mpi-ssh-auth", MountPath: "/root/.ssh"}},
		"nodeCount":   int32(2),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JobSet (-want +got):\n%s", diff)
	}

	optest.Eventually(t, "the hostfile and the SSH keys exist", func(ctx context.Context) error {
		stored := &trainer.TrainJob{}
		if err := optest.Get(ctx, env.Client, key(tj), stored); err != nil {
			return err
		}
		cm := &corev1.ConfigMap{}
		if err := optest.Get(ctx, env.Client, nsName(ns, "alpha-mpi-hostfile"), cm); err != nil {
			return err
		}
		secret := &corev1.Secret{}
		if err := optest.Get(ctx, env.Client, nsName(ns, "alpha-mpi-ssh-auth"), secret); err != nil {
			return err
		}
		got := map[string]any{
			"hostfile":        cm.Data,
			"hostfileOwner":   cm.OwnerReferences,
			"hostfileLabels":  cm.Labels,
			"secretType":      secret.Type,
			"secretImmutable": ptr.Deref(secret.Immutable, false),
			"secretKeys":      slices.Sorted(maps.Keys(secret.Data)),
			"secretOwner":     secret.OwnerReferences,
			"secretLabels":    secret.Labels,
		}
		owned := map[string]string{pipeline.TrainJobNameLabel: "alpha"}
		want := map[string]any{
			"hostfile":        map[string]string{"hostfile": "alpha-node-0-0.alpha slots=8\nalpha-node-0-1.alpha slots=8\n"},
			"hostfileOwner":   controllerRef(stored),
			"hostfileLabels":  owned,
			"secretType":      corev1.SecretTypeSSHAuth,
			"secretImmutable": true,
			"secretKeys":      []string{"ssh-privatekey", "ssh-publickey"},
			"secretOwner":     controllerRef(stored),
			"secretLabels":    owned,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("MPI objects (-want +got):\n%s", diff)
		}
		return nil
	})
	finishes(t, ns, trainer.TrainingRuntimeKind, "mpi", nil)
}

// TestJAXAndXGBoost: the trainer gets the framework's env; the job
// completes or fails.
func TestJAXAndXGBoost(t *testing.T) {
	completionIndex := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
	for _, tc := range []struct {
		plugin string
		policy trainer.MLPolicySource
		want   []corev1.EnvVar
	}{
		{"JAX", trainer.MLPolicySource{JAX: &trainer.JAXMLPolicySource{}}, []corev1.EnvVar{
			{Name: "JAX_NUM_PROCESSES", Value: "2"},
			{Name: "JAX_PROCESS_ID", ValueFrom: completionIndex},
			{Name: "JAX_COORDINATOR_ADDRESS", Value: "alpha-node-0-0.alpha:29500"},
		}},
		{"XGBoost", trainer.MLPolicySource{XGBoost: &trainer.XGBoostMLPolicySource{}}, []corev1.EnvVar{
			{Name: "DMLC_TRACKER_URI", Value: "alpha-node-0-0.alpha"},
			{Name: "DMLC_TRACKER_PORT", Value: "29500"},
			{Name: "DMLC_TASK_ID", ValueFrom: completionIndex},
			{Name: "DMLC_NUM_WORKER", Value: "2"},
		}},
	} {
		t.Run(tc.plugin, func(t *testing.T) {
			ns := cluster.NewNamespace(t, env.Client, "test-", nil)
			runtime := strings.ToLower(tc.plugin)
			createTrainingRuntime(t, ns, runtime, runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: tc.policy},
				replicatedJob(trainer.Node, trainer.AncestorTrainer, trainer.Node)))
			tj := newTrainJob(ns, "alpha", trainer.TrainingRuntimeKind, runtime)
			tj.Spec.Trainer = &trainer.Trainer{}
			create(t, tj)
			js := jobSetOf(t, tj)
			if diff := cmp.Diff(tc.want, container(findJob(&js.Spec, trainer.Node), trainer.Node).Env); diff != "" {
				t.Errorf("node env (-want +got):\n%s", diff)
			}
			finishes(t, ns, trainer.TrainingRuntimeKind, runtime, &trainer.Trainer{})
		})
	}
}
