package status

import (
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

// summarizeJobs merges status.jobsStatus with the Jobs' start and end times, in pipeline order. Without
// Jobs to read (no right to, or gone) the times come from the pods.
func summarizeJobs(tj *trainer.TrainJob, jobs []batchv1.Job, pods []corev1.Pod) []JobSummary {
	if len(jobs) == 0 {
		jobs = jobsFromPods(pods)
	}
	byName := map[string]*JobSummary{}
	out := []JobSummary{}
	for _, js := range tj.Status.JobsStatus {
		out = append(out, JobSummary{Name: js.Name, Ready: ptr.Deref(js.Ready, 0), Active: ptr.Deref(js.Active, 0),
			Succeeded: ptr.Deref(js.Succeeded, 0), Failed: ptr.Deref(js.Failed, 0), Suspended: ptr.Deref(js.Suspended, 0),
			started: stage.Begun(tj.Status.JobsStatus, js)})
	}
	for _, j := range jobs {
		name := j.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
		if name != "" && !slices.ContainsFunc(out, func(s JobSummary) bool { return s.Name == name }) {
			out = append(out, JobSummary{Name: name})
		}
	}
	slices.SortStableFunc(out, func(a, b JobSummary) int { return compareSteps(a.Name, b.Name) })
	for i := range out {
		byName[out[i].Name] = &out[i]
	}
	running := map[string]bool{} // replicated jobs with a Job that has not finished
	for _, j := range jobs {
		s := byName[j.Labels[jobsetv1alpha2.ReplicatedJobNameKey]]
		if s == nil {
			continue
		}
		s.Start = earliest(s.Start, j.Status.StartTime)
		if end := jobEnd(&j); end != nil {
			s.End = latest(s.End, end)
		} else {
			running[s.Name] = true
		}
	}
	for i := range out {
		if running[out[i].Name] {
			out[i].End = nil
		}
	}
	return out
}

// jobsFromPods stands in for the Jobs of the pods' replicated jobs: one per replicated job, started when its
// first pod started and finished when its last container finished, once every pod has finished.
func jobsFromPods(pods []corev1.Pod) []batchv1.Job {
	var jobs []batchv1.Job
	index := map[string]int{}
	for _, p := range pods {
		rj := p.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
		i, ok := index[rj]
		if !ok {
			i = len(jobs)
			index[rj] = i
			jobs = append(jobs, batchv1.Job{})
			jobs[i].Labels = map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: rj}
			jobs[i].Status.CompletionTime = &metav1.Time{}
		}
		j := &jobs[i]
		j.Status.StartTime = earliest(j.Status.StartTime, p.Status.StartTime)
		finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if !finished || j.Status.CompletionTime == nil {
			j.Status.CompletionTime = nil
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				j.Status.CompletionTime = latest(j.Status.CompletionTime, &t.FinishedAt)
			}
		}
	}
	for i := range jobs {
		if c := jobs[i].Status.CompletionTime; c != nil && c.IsZero() {
			jobs[i].Status.CompletionTime = nil
		}
	}
	return jobs
}

// jobEnd is when a Job finished: its completionTime, or when it was marked Failed.
func jobEnd(j *batchv1.Job) *metav1.Time {
	if j.Status.CompletionTime != nil {
		return j.Status.CompletionTime
	}
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return &c.LastTransitionTime
		}
	}
	return nil
}

func earliest(a, b *metav1.Time) *metav1.Time {
	if a == nil || (b != nil && b.Before(a)) {
		return b
	}
	return a
}

func latest(a, b *metav1.Time) *metav1.Time {
	if a == nil || (b != nil && a.Before(b)) {
		return b
	}
	return a
}

// stageSpans lays the pipeline out: Pending from creation until the first Job started, Initializing over the
// initializer Jobs, Training over the trainer Jobs, and the terminal stage at its condition's transition.
// A replicated job counts once its stage has begun (stage.Begun, or a Job of it ended): an active Job
// whose pods wait for a node leaves the TrainJob Pending, so it neither ends Pending nor starts its stage.
// A stage that began starts when its first Job did (that includes how long its pods waited for nodes).
func stageSpans(tj *trainer.TrainJob, current stage.Stage, jobs []JobSummary, now time.Time) []StageSpan {
	var terminal *metav1.Condition
	if current.Terminal() {
		terminal = meta.FindStatusCondition(tj.Status.Conditions, string(current))
	}
	var terminalAt *metav1.Time
	if terminal != nil {
		terminalAt = &terminal.LastTransitionTime
	}
	var init, train StageSpan
	init.Name, train.Name = stage.Initializing, stage.Training
	initDone, trainDone, hasInit := true, true, false
	var firstStart *metav1.Time
	for _, j := range jobs {
		hasInit = hasInit || stage.IsInitializer(j.Name)
		if !j.started && j.End == nil {
			continue
		}
		span, done := &train, &trainDone
		if stage.IsInitializer(j.Name) {
			span, done = &init, &initDone
		}
		span.Start = earliest(span.Start, j.Start)
		firstStart = earliest(firstStart, j.Start)
		if j.End == nil {
			*done = false
		} else {
			span.End = latest(span.End, j.End)
		}
	}
	if !initDone {
		init.End = nil
	}
	if !trainDone {
		train.End = nil
	}
	created := tj.CreationTimestamp.DeepCopy()
	pending := StageSpan{Name: stage.Pending, Start: created, End: firstStart}
	spans := []StageSpan{pending}
	if hasInit || tj.Spec.Initializer != nil {
		spans = append(spans, init)
	}
	spans = append(spans, train)
	// Jobs ran (jobsStatus counts them) but none can be read to tell when: Pending ended, nobody knows when.
	pendingEndUnknown := firstStart == nil && slices.ContainsFunc(jobs, func(j JobSummary) bool { return j.started })
	// A terminal TrainJob closes every stage that had begun: nothing runs any more.
	for i := range spans {
		if i == 0 && pendingEndUnknown {
			continue
		}
		if terminalAt != nil && spans[i].Start != nil && spans[i].End == nil {
			spans[i].End = terminalAt
		}
	}
	if terminalAt != nil {
		spans = append(spans, StageSpan{Name: current, Start: terminalAt, End: terminalAt})
	}
	for i := range spans {
		sp := &spans[i]
		switch {
		case sp.Start == nil, i == 0 && pendingEndUnknown:
		case sp.End != nil:
			sp.Duration = sp.End.Sub(sp.Start.Time).String()
		default:
			sp.Duration = now.Sub(sp.Start.Time).Truncate(time.Second).String()
		}
	}
	return spans
}
