package cmdutil

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// TestLineage: a pod is the TrainJob's only through pod → Job → JobSet → TrainJob controller references;
// without the right to read Jobs, through a Job of a name the JobSet gives its Jobs. (A Job not listed is read:
// test/integration/cli TestForeignPods.)
func TestLineage(t *testing.T) {
	controlledBy := func(owner metav1.Object, kind schema.GroupVersionKind) []metav1.OwnerReference {
		return []metav1.OwnerReference{*metav1.NewControllerRef(owner, kind)}
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "llama", UID: "tj"}}
	other := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "llama", UID: "an-earlier-llama"}}
	tjKind := trainer.GroupVersion.WithKind(trainer.TrainJobKind)
	jobSet := func(owner *trainer.TrainJob) *jobsetv1alpha2.JobSet {
		return &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "llama", UID: "js", OwnerReferences: controlledBy(owner, tjKind)},
			Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: trainer.Node, Replicas: 2}}}}
	}
	js := jobSet(tj)
	jsKind := jobsetv1alpha2.GroupVersion.WithKind("JobSet")
	ours := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "llama-node-1", UID: "ours", OwnerReferences: controlledBy(js, jsKind)}}
	foreign := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "intruder", UID: "foreign"}}
	jobKind := batchv1.SchemeGroupVersion.WithKind("Job")
	pod := func(owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: owners}}
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", nil)
	for _, tc := range []struct {
		name    string
		js      *jobsetv1alpha2.JobSet
		jobs    []batchv1.Job
		jobsErr error
		pod     *corev1.Pod
		want    bool
	}{
		{"a pod of a Job of the JobSet", js, []batchv1.Job{ours, foreign}, nil, pod(controlledBy(&ours, jobKind)), true},
		{"a pod nothing owns", js, []batchv1.Job{ours}, nil, pod(nil), false},
		{"a pod of a Job the JobSet does not control", js, []batchv1.Job{ours, foreign}, nil, pod(controlledBy(&foreign, jobKind)), false},
		{"a Job not listed, and nothing to read it with", js, nil, nil, pod(controlledBy(&ours, jobKind)), false},
		{"a JobSet of the name that another TrainJob controls", jobSet(other), []batchv1.Job{ours}, nil, pod(controlledBy(&ours, jobKind)), false},
		{"no JobSet", nil, []batchv1.Job{ours}, nil, pod(controlledBy(&ours, jobKind)), false},
		{"Jobs unreadable: a Job of the JobSet's names", js, nil, forbidden, pod(controlledBy(&ours, jobKind)), true},
		{"Jobs unreadable: a Job of another name", js, nil, forbidden, pod(controlledBy(&foreign, jobKind)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewLineage(tj, tc.js, tc.jobs, tc.jobsErr, nil).Owns(t.Context(), tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Owns = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLineageReadsNewJobs: a pod of a Job created after the list is the TrainJob's when that Job, read, is its
// JobSet's; and after the JobSet was deleted and built again, when the new JobSet is the TrainJob's.
func TestLineageReadsNewJobs(t *testing.T) {
	tjKind, jsKind, jobKind := trainer.GroupVersion.WithKind(trainer.TrainJobKind), jobsetv1alpha2.GroupVersion.WithKind("JobSet"), batchv1.SchemeGroupVersion.WithKind("Job")
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "ns", UID: "tj"}}
	jobSet := func(uid types.UID) *jobsetv1alpha2.JobSet {
		return &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "ns", UID: uid,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, tjKind)}}}
	}
	job := func(name string, uid types.UID, js *jobsetv1alpha2.JobSet) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jsKind)}}}
	}
	podOf := func(j *batchv1.Job) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-0", Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, jobKind)}}}
	}
	before, now := jobSet("before"), jobSet("now")
	later, rebuilt := job("llama-node-1", "later", before), job("llama-node-0", "rebuilt", now)
	// The JobSet as the API server has it now is the rebuilt one; later's Job is still there.
	reader := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(now, later, rebuilt).Build()
	l := NewLineage(tj, before, nil, nil, reader)
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a pod of a Job created after the list", podOf(later), true},
		{"a pod of a Job of the JobSet built again", podOf(rebuilt), true},
	} {
		got, err := l.Owns(t.Context(), tc.pod)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: Owns = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := l.JobSet().UID; got != "now" {
		t.Errorf("JobSet = %s, want the one built again", got)
	}
}
