package optimization

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
)

// TrialsCreatedAnnotation, on the OptimizationJob, is the number of trials
// the controller has created, those deleted by hand since included. The
// trials' index labels tell the same, but for the last trial created when it
// was deleted by hand: the annotation keeps it counted.
const TrialsCreatedAnnotation = "trainer.kubeflow.org/trials-created"

// TrialName is the name of an OptimizationJob's trial index: the same for
// every attempt to create it, so that a create repeated after a crash finds
// the trial made before it (AlreadyExists) instead of making a second one.
func TrialName(job string, index int) string {
	return job + "-" + strconv.Itoa(index)
}

// NewTrial is trial index of oj, with assignment a: a TrainJob from
// spec.trainJobTemplate whose trainer gets every parameter as an environment
// variable (search.EnvName, replacing a variable of that name in the
// template), labelled with its OptimizationJob and index, annotated with a
// as JSON, and controlled by oj.
func NewTrial(oj *trainer.OptimizationJob, index int, a search.Assignment) (*trainer.TrainJob, error) {
	params, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	tmpl := oj.Spec.TrainJobTemplate.DeepCopy()
	tj := &trainer.TrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   oj.Namespace,
			Name:        TrialName(oj.Name, index),
			Labels:      tmpl.Labels,
			Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         trainer.GroupVersion.String(),
				Kind:               trainer.OptimizationJobKind,
				Name:               oj.Name,
				UID:                oj.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: tmpl.Spec,
	}
	if tj.Labels == nil {
		tj.Labels = map[string]string{}
	}
	tj.Labels[JobNameLabel] = oj.Name
	tj.Labels[TrialIndexLabel] = strconv.Itoa(index)
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	tj.Annotations[ParametersAnnotation] = string(params)
	if tj.Spec.Trainer == nil {
		tj.Spec.Trainer = &trainer.Trainer{}
	}
	for _, p := range a {
		setEnv(&tj.Spec.Trainer.Env, corev1.EnvVar{Name: search.EnvName(p.Name), Value: p.Value})
	}
	return tj, nil
}

// setEnv sets v in env, in place of a variable of the same name.
func setEnv(env *[]corev1.EnvVar, v corev1.EnvVar) {
	for i := range *env {
		if (*env)[i].Name == v.Name {
			(*env)[i] = v
			return
		}
	}
	*env = append(*env, v)
}

// Seed is the random search's seed of an OptimizationJob that sets none: a
// hash of its UID, which outlives every replica of the controller, so that
// a restart continues the same sequence, and which differs between two
// OptimizationJobs of the same spec.
func Seed(uid types.UID) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return int64(h.Sum64())
}

// TrialIndex is the index a trial's label gives it, false when the label is
// missing or not a number.
func TrialIndex(tj *trainer.TrainJob) (int, bool) {
	i, err := strconv.Atoi(tj.Labels[TrialIndexLabel])
	return i, err == nil && i >= 0
}

// TrialParameters is the assignment a trial's annotation holds.
func TrialParameters(tj *trainer.TrainJob) (search.Assignment, error) {
	raw, ok := tj.Annotations[ParametersAnnotation]
	if !ok {
		return nil, fmt.Errorf("no annotation %s", ParametersAnnotation)
	}
	var a search.Assignment
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", ParametersAnnotation, err)
	}
	return a, nil
}

// Objective is the last value the trial reported of metric
// (status.trainerStatus.metrics), false when it reported none or one that is
// not a finite number.
func Objective(tj *trainer.TrainJob, metric string) (float64, bool) {
	if tj.Status.TrainerStatus == nil {
		return 0, false
	}
	for _, m := range tj.Status.TrainerStatus.Metrics {
		if m.Name != metric {
			continue
		}
		v, err := strconv.ParseFloat(m.Value, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false
		}
		return v, true
	}
	return 0, false
}

// Better tells whether objective value a is better than b in direction.
func Better(direction trainer.ObjectiveDirection, a, b float64) bool {
	if direction == trainer.ObjectiveDirectionMaximize {
		return a > b
	}
	return a < b
}

// RecordedCreated is the count of trials created that oj's
// TrialsCreatedAnnotation records: 0 when it records none.
func RecordedCreated(oj *trainer.OptimizationJob) int {
	if n, err := strconv.Atoi(oj.Annotations[TrialsCreatedAnnotation]); err == nil && n > 0 {
		return n
	}
	return 0
}

// Search is an OptimizationJob's search as its trials tell it.
type Search struct {
	// Created counts the trials created: one more than the highest index
	// of a trial, or the OptimizationJob's TrialsCreatedAnnotation if
	// higher. A trial deleted by hand is counted, and never made again.
	Created int
	// Made are the assignments of trials 0..Created-1, in index order; nil
	// for a trial that is gone (deleted by hand) or whose annotation is
	// unreadable.
	Made []search.Assignment
	// Trials are the trials that exist, in index order.
	Trials []*trainer.TrainJob
	// Running, Succeeded and Failed count the trials that exist: not ended,
	// Complete and Failed.
	Running, Succeeded, Failed int
	// Best is the Complete trial whose objective is best (the lowest index
	// among equals), nil while none reported it; BestValue is its value.
	Best      *trainer.TrainJob
	BestValue float64
}

// Observe reads the search of oj from trials, the TrainJobs labelled with
// its name: only those oj controls count (a TrainJob anyone labelled is not
// a trial).
func Observe(oj *trainer.OptimizationJob, trials []trainer.TrainJob) *Search {
	s := &Search{Created: RecordedCreated(oj)}
	byIndex := map[int]*trainer.TrainJob{}
	for i := range trials {
		tj := &trials[i]
		index, ok := TrialIndex(tj)
		if !ok || !metav1.IsControlledBy(tj, oj) {
			continue
		}
		byIndex[index] = tj
		s.Created = max(s.Created, index+1)
	}
	s.Made = make([]search.Assignment, s.Created)
	var metric string
	direction := trainer.ObjectiveDirectionMinimize
	if len(oj.Spec.Objectives) > 0 {
		metric, direction = oj.Spec.Objectives[0].Metric, oj.Spec.Objectives[0].Direction
	}
	for index := range s.Created {
		tj, ok := byIndex[index]
		if !ok {
			continue
		}
		s.Trials = append(s.Trials, tj)
		if a, err := TrialParameters(tj); err == nil {
			s.Made[index] = a
		}
		switch {
		case meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete):
			s.Succeeded++
			if v, ok := Objective(tj, metric); ok && (s.Best == nil || Better(direction, v, s.BestValue)) {
				s.Best, s.BestValue = tj, v
			}
		case meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed):
			s.Failed++
		default:
			s.Running++
		}
	}
	return s
}
