package cmdutil

import (
	"context"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
)

// Lineage tells a TrainJob's pods and Jobs from those that only look like them. The JobSet's name label
// (ChildrenOf) selects the candidates, but anyone can copy labels onto a pod, or into the template of a Job of
// their own: a pod is the TrainJob's only when its controller chain, pod → Job → JobSet, ends at the JobSet the
// TrainJob controls, by UID, as the Job and JobSet controllers (and upstream Trainer's) set their
// ownerReferences. Every command that shows, follows, forwards to or counts a TrainJob's pods asks Owns.
//
// A user who may not read Jobs (a namespace Role often grants pods and JobSets only) cannot see the middle
// link: the pod's controller must then be a Job named as the JobSet names its Jobs
// (JOBSET-REPLICATEDJOB-INDEX), a name only one Job at a time can have. A TrainJob without a JobSet it
// controls has no pods.
type Lineage struct {
	trainJob *trainer.TrainJob
	reader   client.Reader // reads a Job it has not seen; nil reads none

	mu             sync.Mutex
	jobSet         *jobsetv1alpha2.JobSet // the JobSet the TrainJob controls; nil when it has none
	jobs           map[types.UID]bool     // Job UID → whether the JobSet controls it
	jobsUnreadable bool                   // Jobs are Forbidden: judge by the Job's name
}

// ChildrenOf selects the Jobs and pods of the JobSet named name: the candidates Lineage judges.
func ChildrenOf(name string) client.MatchingLabels {
	return client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}
}

// NewLineage is the lineage of tj, given the JobSet of its name (nil when there is none; one tj does not
// control counts as none) and the Jobs ChildrenOf listed, with the error of that list: Forbidden makes
// Owns judge by names. reader reads a Job that a pod names and jobs did not hold (created since, or not
// listed); nil trusts no such pod.
func NewLineage(tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet, jobs []batchv1.Job, jobsErr error, reader client.Reader) *Lineage {
	l := &Lineage{trainJob: tj, reader: reader, jobs: map[types.UID]bool{}, jobsUnreadable: apierrors.IsForbidden(jobsErr)}
	if js != nil && metav1.IsControlledBy(js, tj) {
		l.jobSet = js
	}
	for i := range jobs {
		l.jobs[jobs[i].UID] = l.controls(&jobs[i])
	}
	return l
}

// ReadLineage reads tj's JobSet and the Jobs ChildrenOf selects, at once, and makes their Lineage; reader
// reads Jobs it has not seen. A JobSet or Jobs the user may not read are none (Jobs then judged by name).
func ReadLineage(ctx context.Context, c client.Reader, tj *trainer.TrainJob) (*Lineage, error) {
	var (
		js           = &jobsetv1alpha2.JobSet{}
		jobs         batchv1.JobList
		jsErr, jbErr error
		wg           sync.WaitGroup
	)
	wg.Go(func() { jsErr = c.Get(ctx, client.ObjectKeyFromObject(tj), js) })
	wg.Go(func() { jbErr = c.List(ctx, &jobs, client.InNamespace(tj.Namespace), ChildrenOf(tj.Name)) })
	wg.Wait()
	switch {
	case apierrors.IsNotFound(jsErr) || apierrors.IsForbidden(jsErr):
		js = nil
	case jsErr != nil:
		return nil, jsErr
	}
	if jbErr != nil && !apierrors.IsForbidden(jbErr) {
		return nil, jbErr
	}
	return NewLineage(tj, js, jobs.Items, jbErr, c), nil
}

// JobSet is the JobSet the TrainJob controls, nil when it has none.
func (l *Lineage) JobSet() *jobsetv1alpha2.JobSet {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.jobSet
}

// Jobs are those of jobs that the TrainJob's JobSet controls.
func (l *Lineage) Jobs(jobs []batchv1.Job) []batchv1.Job {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []batchv1.Job
	for i := range jobs {
		if l.controls(&jobs[i]) {
			out = append(out, jobs[i])
		}
	}
	return out
}

// Pods are those of pods that are the TrainJob's (Owns).
func (l *Lineage) Pods(ctx context.Context, pods []corev1.Pod) ([]corev1.Pod, error) {
	var out []corev1.Pod
	for i := range pods {
		ok, err := l.Owns(ctx, &pods[i])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, pods[i])
		}
	}
	return out, nil
}

// Owns tells whether pod is the TrainJob's: its controller is a Job that the TrainJob's JobSet controls. A Job
// not seen before (a pod that came after the list, as `logs -f` and port-forward see them) is read, not
// trusted; one that is gone owns nothing. The error is only that of reading such a Job.
func (l *Lineage) Owns(ctx context.Context, pod *corev1.Pod) (bool, error) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if l.jobSet == nil || ref == nil || ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
		return false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok, seen := l.jobs[ref.UID]; seen {
		return ok, nil
	}
	if l.jobsUnreadable {
		return l.jobNames().Has(ref.Name), nil
	}
	if l.reader == nil {
		return false, nil
	}
	job := &batchv1.Job{}
	err := l.reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, job)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsForbidden(err):
		l.jobsUnreadable = true
		return l.jobNames().Has(ref.Name), nil
	case err != nil:
		return false, fmt.Errorf("read Job %s of pod %s: %w", ref.Name, pod.Name, err)
	}
	if job.UID != ref.UID {
		// Another Job of that name since: the pod's Job is gone.
		return false, nil
	}
	if err := l.rebuilt(ctx, job); err != nil {
		return false, err
	}
	l.jobs[job.UID] = l.controls(job)
	return l.jobs[job.UID], nil
}

// rebuilt takes the TrainJob's JobSet again when job's controller is a JobSet of its name but not the one
// read: it was deleted and built again (the operator builds one deleted while it runs) since the Lineage was
// made, and the new one's Jobs are the TrainJob's when the TrainJob controls it.
func (l *Lineage) rebuilt(ctx context.Context, job *batchv1.Job) error {
	ref := metav1.GetControllerOfNoCopy(job)
	if ref == nil || ref.Kind != "JobSet" || ref.Name != l.jobSet.Name || ref.UID == l.jobSet.UID {
		return nil
	}
	js := &jobsetv1alpha2.JobSet{}
	switch err := l.reader.Get(ctx, client.ObjectKeyFromObject(l.jobSet), js); {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return nil
	case err != nil:
		return fmt.Errorf("read JobSet %s: %w", l.jobSet.Name, err)
	}
	if js.UID == ref.UID && metav1.IsControlledBy(js, l.trainJob) {
		l.jobSet, l.jobs = js, map[types.UID]bool{}
	}
	return nil
}

// controls tells whether the TrainJob's JobSet controls job.
func (l *Lineage) controls(job *batchv1.Job) bool {
	return l.jobSet != nil && metav1.IsControlledBy(job, l.jobSet)
}

// jobNames are the names the JobSet gives its Jobs: JOBSET-REPLICATEDJOB-INDEX (the JobSet controller's
// placement.GenJobName).
func (l *Lineage) jobNames() sets.Set[string] {
	names := sets.New[string]()
	for _, rj := range l.jobSet.Spec.ReplicatedJobs {
		for i := range rj.Replicas {
			names.Insert(fmt.Sprintf("%s-%s-%d", l.jobSet.Name, rj.Name, i))
		}
	}
	return names
}
