// Package jobset is the JobSet plugin, owner of the runtime template: it
// settles the pods' DNS names and counts before the build (PreBuildSync),
// stamps the TrainJob's trainer and initializer settings into the template
// and returns the JobSet to apply (Build), checks a TrainJob against its
// runtime at admission (Validate) and reads the TrainJob's status back from
// the JobSet (Status).
//
// The ML plugins have already edited the pod templates in place by the time
// Build runs; Build must not undo their work (env order, torchtune command).
package jobset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Name is the plugin's name in the registry.
const Name = "JobSet"

// JobSet turns the RuntimeInfo into the TrainJob's JobSet.
type JobSet struct {
	// client reads the cluster.
	client client.Reader
}

var (
	_ pipeline.CustomValidationPlugin    = (*JobSet)(nil)
	_ pipeline.WatchExtensionPlugin      = (*JobSet)(nil)
	_ pipeline.PreComponentBuilderPlugin = (*JobSet)(nil)
	_ pipeline.ComponentBuilderPlugin    = (*JobSet)(nil)
	_ pipeline.TrainJobStatusPlugin      = (*JobSet)(nil)
	_ pipeline.CacheTrimPlugin           = (*JobSet)(nil)
)

// New builds the JobSet plugin.
func New(_ context.Context, h pipeline.Handle) (pipeline.Plugin, error) {
	return &JobSet{client: h.Reader()}, nil
}

// Name returns the plugin's name.
func (j *JobSet) Name() string { return Name }

// ReconcilerBuilders makes the TrainJob controller watch the JobSets it owns.
func (j *JobSet) ReconcilerBuilders() []pipeline.ReconcilerBuilder {
	return []pipeline.ReconcilerBuilder{
		func(b *builder.Builder, _ client.Client, _ cache.Cache) *builder.Builder {
			return pipeline.Owns(b, &jobsetv1alpha2.JobSet{})
		},
	}
}

// PreBuildSync gives every pod set its endpoints and copies its count into
// the replicated job's parallelism and completions.
func (j *JobSet) PreBuildSync(info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) error {
	if info.Template == nil {
		return nil
	}
	subdomain := trainJob.Name
	if n := info.Template.Network; n != nil && n.Subdomain != "" {
		subdomain = n.Subdomain
	}
	for k := range info.PodSets {
		ps := &info.PodSets[k]
		rj := replicatedJob(info, k)
		if rj == nil {
			continue
		}
		ps.Endpoints = pipeline.Endpoints(trainJob.Name, rj.Name, max(rj.Replicas, 1), ps.Count, subdomain)
		setInt32(&rj.Template.Spec.Parallelism, ps.Count)
		setInt32(&rj.Template.Spec.Completions, ps.Count)
	}
	return nil
}

// replicatedJob returns the replicated job of the k-th pod set. Pod sets are
// index-aligned with the template, so the name check is a safeguard.
func replicatedJob(info *pipeline.RuntimeInfo, k int) *jobsetv1alpha2.ReplicatedJob {
	if rjs := info.Template.ReplicatedJobs; k < len(rjs) && rjs[k].Name == info.PodSets[k].Name {
		return &rjs[k]
	}
	return info.ReplicatedJob(&info.PodSets[k])
}

// setInt32 sets *p to v, reusing the pointee: the template is the
// framework's own copy, so writing through it is safe and allocates nothing.
func setInt32(p **int32, v int32) {
	if *p == nil {
		*p = ptr.To(v)
		return
	}
	**p = v
}

// Build returns the TrainJob's JobSet, or nothing when a JobSet is already
// running: running JobSets are never updated, the TrainJob must be
// suspended first.
//
// Build completes info.Template in place (it is the JobSet spec being
// built) rather than copying it, and the JobSet's spec shares its memory:
// the RuntimeInfo is spent once the JobSet is built.
func (j *JobSet) Build(ctx context.Context, info *pipeline.RuntimeInfo, trainJob *trainer.TrainJob) ([]client.Object, error) {
	if info.Template == nil {
		return nil, errors.New("runtime has no JobSet template")
	}
	if n := len(info.Template.ReplicatedJobs); n < len(info.PodSets) {
		return nil, fmt.Errorf("runtime template has %d replicated jobs for %d pod sets", n, len(info.PodSets))
	}
	running, err := j.jobSetRunning(ctx, trainJob)
	if err != nil || running {
		return nil, err
	}

	spec := info.Template
	launcherAsNode := runLauncherAsNode(info)
	for k := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[k]
		pod := &rj.Template.Spec.Template
		switch rj.Template.Labels[trainer.AncestorLabel] {
		case trainer.AncestorDatasetInitializer:
			rj.Replicas = 1
			if in := trainJob.Spec.Initializer; in != nil && in.Dataset != nil {
				stampInitializer(findContainer(pod.Spec.Containers, trainer.DatasetInitializerName), in.Dataset.StorageUri, in.Dataset.Env, in.Dataset.SecretRef)
			}
		case trainer.AncestorModelInitializer:
			rj.Replicas = 1
			if in := trainJob.Spec.Initializer; in != nil && in.Model != nil {
				stampInitializer(findContainer(pod.Spec.Containers, trainer.ModelInitializerName), in.Model.StorageUri, in.Model.Env, in.Model.SecretRef)
			}
		case trainer.AncestorTrainer:
			rj.Replicas = 1
			stampTrainer(findContainer(pod.Spec.Containers, trainer.Node), trainJob.Spec.Trainer, entrypointSettled(info, rj.Name))
		default:
			// MPI's launcher is a trainer node too; the job named `node`
			// runs the other nodes and needs the same environment.
			if launcherAsNode && rj.Name == trainer.Node && trainJob.Spec.Trainer != nil {
				if c := findContainer(pod.Spec.Containers, trainer.Node); c != nil {
					pipeline.UpsertEnv(c, trainJob.Spec.Trainer.Env...)
				}
			}
		}
		pod.Labels = addAll(pod.Labels, info.Scheduler.PodLabels)
		pod.Annotations = addAll(pod.Annotations, info.Scheduler.PodAnnotations)
	}
	spec.Suspend = ptr.To(ptr.Deref(trainJob.Spec.Suspend, false))
	setDefaults(spec)

	js := &jobsetv1alpha2.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            trainJob.Name,
			Namespace:       trainJob.Namespace,
			Labels:          maps.Clone(info.Labels),
			Annotations:     maps.Clone(info.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(trainJob, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
		},
		Spec: *spec,
	}
	return []client.Object{js}, nil
}

// setDefaults sets what JobSet (v0.12) defaults when it is left out — its
// defaulting webhook, and the CRD's schema for groupName — so that the JobSet
// is created as it is stored: the webhook has nothing to change, and the API
// server no patch to apply and decode again at every create. Render shows
// the JobSet as it will be.
func setDefaults(spec *jobsetv1alpha2.JobSetSpec) {
	if spec.SuccessPolicy == nil {
		spec.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll}
	}
	if spec.StartupPolicy == nil {
		spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder}
	}
	for k := range spec.ReplicatedJobs {
		if spec.ReplicatedJobs[k].GroupName == "" {
			spec.ReplicatedJobs[k].GroupName = "default"
		}
		job := &spec.ReplicatedJobs[k].Template.Spec
		if job.CompletionMode == nil {
			job.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		}
		if job.Template.Spec.RestartPolicy == "" {
			job.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}
	}
	if spec.Network == nil {
		spec.Network = &jobsetv1alpha2.Network{}
	}
	if spec.Network.EnableDNSHostnames == nil {
		spec.Network.EnableDNSHostnames = ptr.To(true)
	}
	if spec.Network.PublishNotReadyAddresses == nil {
		spec.Network.PublishNotReadyAddresses = ptr.To(true)
	}
	if spec.FailurePolicy != nil {
		if spec.FailurePolicy.RestartStrategy == "" {
			spec.FailurePolicy.RestartStrategy = jobsetv1alpha2.Recreate
		}
		for i := range spec.FailurePolicy.Rules {
			if spec.FailurePolicy.Rules[i].Name == "" {
				spec.FailurePolicy.Rules[i].Name = fmt.Sprintf("failurePolicyRule%d", i)
			}
		}
	}
	for i := range spec.VolumeClaimPolicies {
		if spec.VolumeClaimPolicies[i].RetentionPolicy == nil {
			spec.VolumeClaimPolicies[i].RetentionPolicy = &jobsetv1alpha2.VolumeRetentionPolicy{WhenDeleted: ptr.To(jobsetv1alpha2.RetentionPolicyDelete)}
		}
	}
}

// jobSetRunning reports whether the TrainJob's JobSet exists and neither it
// nor the TrainJob is suspended.
func (j *JobSet) jobSetRunning(ctx context.Context, trainJob *trainer.TrainJob) (bool, error) {
	var js jobsetv1alpha2.JobSet
	if err := pipeline.GetControlled(ctx, j.client, trainJob, client.ObjectKeyFromObject(trainJob), &js); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return !ptr.Deref(trainJob.Spec.Suspend, false) && !ptr.Deref(js.Spec.Suspend, false), nil
}

func runLauncherAsNode(info *pipeline.RuntimeInfo) bool {
	mp := info.MLPolicySource()
	return mp != nil && mp.MPI != nil && ptr.Deref(mp.MPI.RunLauncherAsNode, false)
}

// stampInitializer gives an initializer container the TrainJob's storage
// URI, env and secret. STORAGE_URI goes first so that an explicit env entry
// of the same name in the TrainJob wins.
func stampInitializer(c *corev1.Container, storageURI *string, env []corev1.EnvVar, secret *corev1.LocalObjectReference) {
	if c == nil {
		return
	}
	if storageURI != nil {
		pipeline.UpsertEnv(c, corev1.EnvVar{Name: trainer.StorageURIEnv, Value: *storageURI})
	}
	pipeline.UpsertEnv(c, env...)
	if secret != nil && !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
		return e.SecretRef != nil && e.SecretRef.Name == secret.Name
	}) {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: *secret}})
	}
}

// stampTrainer gives the trainer's `node` container the TrainJob's image,
// command, args and env. The ML plugins have already upserted the env (so
// upserting again keeps their order: user env, then framework env), and may
// have settled the entrypoint (torchtune's recipe invocation), which
// spec.trainer's `tune run` must not overwrite.
func stampTrainer(c *corev1.Container, t *trainer.Trainer, entrypointSettled bool) {
	if c == nil || t == nil {
		return
	}
	if t.Image != nil {
		c.Image = *t.Image
	}
	if !entrypointSettled {
		if t.Command != nil {
			c.Command = slices.Clone(t.Command)
		}
		if t.Args != nil {
			c.Args = slices.Clone(t.Args)
		}
	}
	pipeline.UpsertEnv(c, t.Env...)
}

// entrypointSettled reports whether an ML plugin settled the command and
// args of the job's `node` container.
func entrypointSettled(info *pipeline.RuntimeInfo, job string) bool {
	ps := info.PodSet(job)
	return ps != nil && ps.EntrypointSetBy != ""
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for k := range cs {
		if cs[k].Name == name {
			return &cs[k]
		}
	}
	return nil
}

// addAll sets every entry of src in dst, allocating dst only when needed.
func addAll(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

// Status derives the TrainJob's status from its JobSet: a Completed or
// Failed JobSet makes the TrainJob Complete or Failed, and jobsStatus
// mirrors the JobSet's replicated jobs (notStarted until the JobSet
// controller reports them).
func (j *JobSet) Status(ctx context.Context, trainJob *trainer.TrainJob) (*trainer.TrainJobStatus, error) {
	status := trainJob.Status.DeepCopy()
	var js jobsetv1alpha2.JobSet
	// Never the status of a JobSet the TrainJob does not control.
	if err := pipeline.GetControlled(ctx, j.client, trainJob, client.ObjectKeyFromObject(trainJob), &js); err != nil {
		if apierrors.IsNotFound(err) && finished(trainJob) {
			// A finished JobSet may have been deleted by its TTL.
			return status, nil
		}
		return nil, fmt.Errorf("getting JobSet %s: %w", client.ObjectKeyFromObject(trainJob), err)
	}
	copyCondition(status, &js, trainJob.Generation, string(jobsetv1alpha2.JobSetCompleted), trainer.TrainJobComplete)
	copyCondition(status, &js, trainJob.Generation, string(jobsetv1alpha2.JobSetFailed), trainer.TrainJobFailed)

	status.JobsStatus = nil
	replicatedJobs := js.Status.ReplicatedJobsStatus
	if replicatedJobs == nil {
		replicatedJobs = notStarted(&js)
	}
	for _, rj := range replicatedJobs {
		status.JobsStatus = append(status.JobsStatus, trainer.JobStatus{
			Name:      rj.Name,
			Ready:     ptr.To(rj.Ready),
			Succeeded: ptr.To(rj.Succeeded),
			Failed:    ptr.To(rj.Failed),
			Active:    ptr.To(rj.Active),
			Suspended: ptr.To(rj.Suspended),
		})
	}
	return status, nil
}

// notStarted is the status of the replicated jobs of a JobSet its
// controller has not reported on yet: none of its Jobs exists, so none is
// ready, active, suspended or done. It is what the JobSet controller
// reports first, in its order (by name, descending): the status written
// with ComponentsCreated then needs no second write when that report comes.
func notStarted(js *jobsetv1alpha2.JobSet) []jobsetv1alpha2.ReplicatedJobStatus {
	out := make([]jobsetv1alpha2.ReplicatedJobStatus, 0, len(js.Spec.ReplicatedJobs))
	for _, rj := range js.Spec.ReplicatedJobs {
		out = append(out, jobsetv1alpha2.ReplicatedJobStatus{Name: rj.Name})
	}
	slices.SortFunc(out, func(a, b jobsetv1alpha2.ReplicatedJobStatus) int { return strings.Compare(b.Name, a.Name) })
	return out
}

// copyCondition sets the TrainJob condition typ from the JobSet condition
// from when that one is True, keeping its reason, message and transition time.
func copyCondition(status *trainer.TrainJobStatus, js *jobsetv1alpha2.JobSet, generation int64, from, typ string) {
	c := meta.FindStatusCondition(js.Status.Conditions, from)
	if c == nil || c.Status != metav1.ConditionTrue {
		return
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type:               typ,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: generation,
		LastTransitionTime: c.LastTransitionTime,
		Reason:             c.Reason,
		Message:            c.Message,
	})
}

func finished(trainJob *trainer.TrainJob) bool {
	return meta.IsStatusConditionTrue(trainJob.Status.Conditions, trainer.TrainJobComplete) ||
		meta.IsStatusConditionTrue(trainJob.Status.Conditions, trainer.TrainJobFailed)
}
