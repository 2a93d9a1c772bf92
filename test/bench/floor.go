package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"golang.org/x/sync/errgroup"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/config"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/snapshot"
)

// Round C is the floor: the work an operator that cost nothing would cause. The benchmark creates TrainJobs
// the operator leaves alone (spec.managedBy names MultiKueue) and writes, for each, what the operator wrote for
// one TrainJob of the first A round: its snapshot ConfigMap, its JobSet, its status and its Event, as the
// operator's ServiceAccount, with the operator's client rates and as many workers as it has. What A takes
// beyond C is the operator's own cost.

// templates are what the operator wrote for one TrainJob of the first A round.
type templates struct {
	trainJob string // that TrainJob's name, which each copy replaces by its own
	jobSet   *jobsetv1alpha2.JobSet
	snapshot *corev1.ConfigMap
	status   trainer.TrainJobStatus
	event    *eventsv1.Event
}

// takeTemplates keeps what the operator wrote for one TrainJob of ns, once it has settled.
func (b *bench) takeTemplates(ctx context.Context, ns string) error {
	var jobSets jobsetv1alpha2.JobSetList
	if err := b.admin.List(ctx, &jobSets, client.InNamespace(ns), client.Limit(1)); err != nil {
		return err
	}
	if len(jobSets.Items) == 0 {
		return fmt.Errorf("no JobSet in %s to copy", ns)
	}
	js := jobSets.Items[0].DeepCopy()
	tj := &trainer.TrainJob{}
	if err := b.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: js.Name}, tj); err != nil {
		return fmt.Errorf("the TrainJob of JobSet %s/%s: %w", ns, js.Name, err)
	}
	snap := &corev1.ConfigMap{}
	if err := b.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: snapshot.Name(tj)}, snap); err != nil {
		return fmt.Errorf("the snapshot of TrainJob %s/%s: %w", ns, tj.Name, err)
	}
	var events eventsv1.EventList
	if err := b.admin.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return err
	}
	i := slices.IndexFunc(events.Items, func(e eventsv1.Event) bool { return e.Regarding.UID == tj.UID })
	if i < 0 {
		return fmt.Errorf("no Event of TrainJob %s/%s to copy", ns, tj.Name)
	}
	js.ObjectMeta = metav1.ObjectMeta{Name: js.Name, Labels: js.Labels, Annotations: js.Annotations}
	js.Status = jobsetv1alpha2.JobSetStatus{}
	snap.ObjectMeta = metav1.ObjectMeta{Name: snap.Name, Labels: snap.Labels, Annotations: snap.Annotations}
	event := events.Items[i].DeepCopy()
	event.ObjectMeta = metav1.ObjectMeta{}
	b.templates = &templates{trainJob: tj.Name, jobSet: js, snapshot: snap, status: tj.Status, event: event}
	return nil
}

// floorClient is a client of the operator's ServiceAccount with its client rates, and the number of the
// operator's TrainJob workers.
func (b *bench) floorClient() (client.Client, int, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(b.out, "stack", "operator", "kubeconfig"))
	if err != nil {
		return nil, 0, err
	}
	cfg.QPS, cfg.Burst = b.qps, b.burst
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	workers := b.stack.Operator.Config.Controller.GroupKindConcurrency[config.TrainJobGroupKind]
	if workers == 0 {
		workers = config.DefaultTrainJobConcurrency
	}
	return c, workers, err
}

// floor creates n TrainJobs of ns that the operator leaves alone, as an A round creates them, reports the end
// of those creates to created, and writes for each what the operator would.
func (b *bench) floor(ctx context.Context, ns string, n int, created chan<- error) error {
	if b.floorWriter == nil {
		var err error
		if b.floorWriter, b.floorWorkers, err = b.floorClient(); err != nil {
			created <- err
			return err
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	made := make(chan *trainer.TrainJob, n)
	g.Go(func() error {
		defer close(made)
		err := createAll(ctx, b.driver, n, func(i int) client.Object {
			tj := trainJob(ns, i, false)
			tj.Spec.ManagedBy = ptr.To(trainer.MultiKueueController)
			return tj
		}, func(obj client.Object) { made <- obj.(*trainer.TrainJob) })
		created <- err
		return err
	})
	for range b.floorWorkers {
		g.Go(func() error {
			for tj := range made {
				if err := b.writeAsOperator(ctx, tj); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// writeAsOperator writes for tj what the operator wrote for the templates' TrainJob, in the operator's order.
func (b *bench) writeAsOperator(ctx context.Context, tj *trainer.TrainJob) error {
	t := b.templates
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))}
	snapshot := t.snapshot.DeepCopy()
	snapshot.ObjectMeta = b.copyMeta(snapshot.ObjectMeta, tj, owner)
	js := t.jobSet.DeepCopy()
	js.ObjectMeta = b.copyMeta(js.ObjectMeta, tj, owner)
	for _, obj := range []client.Object{snapshot, js} {
		if err := b.floorWriter.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	tj.Status = *t.status.DeepCopy()
	if err := b.floorWriter.Status().Update(ctx, tj); err != nil {
		return fmt.Errorf("update the status of TrainJob %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	event := t.event.DeepCopy()
	event.Namespace, event.Name = tj.Namespace, fmt.Sprintf("%s.%x", tj.Name, time.Now().UnixNano())
	event.EventTime = metav1.NowMicro()
	event.Regarding = corev1.ObjectReference{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind,
		Namespace: tj.Namespace, Name: tj.Name, UID: tj.UID, ResourceVersion: tj.ResourceVersion}
	if err := b.floorWriter.Create(ctx, event); err != nil {
		return fmt.Errorf("create the Event of TrainJob %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	return nil
}

// copyMeta is the metadata of a template's copy for tj: its namespace, owners, and the template TrainJob's
// name replaced by tj's in its name, labels and annotations.
func (b *bench) copyMeta(m metav1.ObjectMeta, tj *trainer.TrainJob, owners []metav1.OwnerReference) metav1.ObjectMeta {
	rename := func(s string) string { return strings.Replace(s, b.templates.trainJob, tj.Name, 1) }
	renamed := func(in map[string]string) map[string]string {
		out := make(map[string]string, len(in))
		for k, v := range in {
			out[k] = rename(v)
		}
		return out
	}
	return metav1.ObjectMeta{Namespace: tj.Namespace, Name: rename(m.Name), Labels: renamed(m.Labels), Annotations: renamed(m.Annotations),
		OwnerReferences: owners}
}
