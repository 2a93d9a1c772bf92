package kueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// kueueCannotAdmit are the shipped runtimes whose TrainJobs Kueue v0.17 reserves quota for but cannot resume,
// and why. Upstream Kubeflow Trainer with the same Kueue has the same limit (docs/kueue.md).
var kueueCannotAdmit = map[string]string{
	"flux-distributed": "Kueue runs Trainer v2.2's Flux plugin on its own copy of the TrainJob, which fills in " +
		"spec.trainer, and its update that resumes the TrainJob is refused: spec.trainer is immutable",
}

// podSet is what Kueue accounts for of one PodSet: its name, its number of pods and what each container asks.
type podSet struct {
	Name      string
	Count     int32
	Resources map[string]corev1.ResourceRequirements // by container name, init containers too
}

// TestPodSetsEqualKueue: for a TrainJob of every shipped ClusterTrainingRuntime, the PodSets Kueue computes
// with upstream Trainer's code (its Workload) are those of the JobSet our operator builds — one per
// replicated job, in order, count = replicas × parallelism, the same container resources — and Kueue admits
// it, which it refuses when the counts differ (BadPodSetsInfoLenError).
func TestPodSetsEqualKueue(t *testing.T) {
	ns := queueNamespace(t)
	var runtimes trainer.ClusterTrainingRuntimeList
	if err := suite.client.List(t.Context(), &runtimes); err != nil {
		t.Fatal(err)
	}
	if len(runtimes.Items) == 0 {
		t.Fatal("no ClusterTrainingRuntime installed")
	}
	for _, rt := range runtimes.Items {
		t.Run(rt.Name, func(t *testing.T) {
			// The TrainJob of the runtime before (deleted in the foreground, not awaited) may still hold quota.
			queueIdle(t)
			// An empty trainer keeps the runtime's defaults; without one, Trainer v2.2's Flux plugin, which Kueue
			// runs, dereferences nil and Kueue's webhook refuses the TrainJob (docs/kueue.md).
			tj := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ReplaceAll(rt.Name, ".", "-"),
					Labels: map[string]string{queueLabel: cluster.KueueLocalQueue}},
				Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt.Name}, Trainer: &trainer.Trainer{}},
			}
			create(t, tj)
			var kueueSets []podSet
			cluster.Eventually(t, "Kueue's Workload", waitTimeout, func(ctx context.Context) error {
				wl, err := workloadOf(ctx, tj)
				if err != nil {
					return err
				}
				kueueSets, err = workloadPodSets(wl)
				return err
			})
			js := &jobsetv1alpha2.JobSet{}
			cluster.Eventually(t, "our JobSet", waitTimeout, func(ctx context.Context) error { return suite.client.Get(ctx, client.ObjectKeyFromObject(tj), js) })
			if diff := cmp.Diff(kueueSets, jobSetPodSets(js), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("PodSets (-Kueue's Workload +our JobSet):\n%s", diff)
			}
			if why, ok := kueueCannotAdmit[rt.Name]; ok {
				t.Logf("not admitted by Kueue v0.17: %s", why)
			} else {
				cluster.Eventually(t, "the Workload admitted and the JobSet resumed", waitTimeout, func(ctx context.Context) error {
					wl, err := workloadOf(ctx, tj)
					if err != nil {
						return err
					}
					if c := condition(wl, "Admitted"); c["status"] != "True" {
						return fmt.Errorf("Workload Admitted %v", c)
					}
					if err := suite.client.Get(ctx, client.ObjectKeyFromObject(tj), js); err != nil {
						return err
					}
					if ptr.Deref(js.Spec.Suspend, false) {
						return errors.New("the JobSet is still suspended")
					}
					return nil
				})
			}
			if err := suite.client.Delete(t.Context(), tj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func workloadPodSets(wl *unstructured.Unstructured) ([]podSet, error) {
	var spec struct {
		PodSets []struct {
			Name     string                 `json:"name"`
			Count    int32                  `json:"count"`
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"podSets"`
	}
	raw, _, _ := unstructured.NestedMap(wl.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, err
	}
	var sets []podSet
	for _, ps := range spec.PodSets {
		sets = append(sets, podSet{Name: ps.Name, Count: ps.Count, Resources: resources(&ps.Template.Spec)})
	}
	return sets, nil
}

func jobSetPodSets(js *jobsetv1alpha2.JobSet) []podSet {
	var sets []podSet
	for _, rj := range js.Spec.ReplicatedJobs {
		sets = append(sets, podSet{
			Name:      rj.Name,
			Count:     rj.Replicas * ptr.Deref(rj.Template.Spec.Parallelism, 1),
			Resources: resources(&rj.Template.Spec.Template.Spec),
		})
	}
	return sets
}

func resources(spec *corev1.PodSpec) map[string]corev1.ResourceRequirements {
	m := map[string]corev1.ResourceRequirements{}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		m[c.Name] = c.Resources
	}
	return m
}
