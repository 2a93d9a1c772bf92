// Package metrics holds the operator's own Prometheus metrics, served on
// controller-runtime's /metrics next to its controller and client metrics.
// Like those, they live in controller-runtime's process-wide registry; Register
// adds them once however many operators a process runs (tests run several).
package metrics

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

// Metric names.
const (
	ReconcileDurationName = "trainjob_reconcile_duration_seconds"
	TrainJobsName         = "trainjobs"
	StageTransitionName   = "trainjob_stage_transition_seconds"
	BuildErrorsName       = "trainjob_build_errors_total"
)

// Label values.
const (
	ResultSuccess = "success"
	ResultError   = "error"
	// RuntimePlugin labels build errors that no plugin raised: resolving the
	// runtime, its snapshot, or applying runtimePatches to its template.
	RuntimePlugin = "runtime"
)

// Metrics are the operator's counters and histograms. The operator's are
// Default; a test makes its own (New) and registers it in a registry of its
// own, so that what it reads moved only by what the test did.
type Metrics struct {
	reconcileDuration *prometheus.HistogramVec
	stageTransition   *prometheus.HistogramVec
	buildErrors       *prometheus.CounterVec
}

// New makes a set of the metrics, registered nowhere.
func New() *Metrics {
	return &Metrics{
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    ReconcileDurationName,
			Help:    "Time a reconcile of a TrainJob took, by result (success or error).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"result"}),
		stageTransition: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: StageTransitionName,
			Help: "Time a TrainJob spent in a stage before it moved to the next, by stage left (from) and stage entered (to).",
			// 1s to about 6 days.
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}, []string{"from", "to"}),
		buildErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: BuildErrorsName,
			Help: "Build phases of TrainJobs that failed, by the plugin that failed (runtime when none did).",
		}, []string{"plugin"}),
	}
}

// Register adds m's metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.reconcileDuration, m.stageTransition, m.buildErrors} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

var (
	// Default are the operator's metrics, served by Register.
	Default = New()

	trainJobs = &stageCollector{desc: prometheus.NewDesc(TrainJobsName,
		"TrainJobs the operator sees, by stage (reported by the leader only).", []string{"stage"}, nil)}

	registerOnce sync.Once
)

// Register adds Default and the trainjobs gauge to controller-runtime's
// registry, once.
func Register() {
	registerOnce.Do(func() {
		if err := Default.Register(crmetrics.Registry); err != nil {
			panic(err)
		}
		crmetrics.Registry.MustRegister(trainJobs)
	})
}

// ObserveReconcile records how long a reconcile took.
func (m *Metrics) ObserveReconcile(d time.Duration, err error) {
	result := ResultSuccess
	if err != nil {
		result = ResultError
	}
	m.reconcileDuration.WithLabelValues(result).Observe(d.Seconds())
}

// ObserveStageTransition records the time spent in stage from before to.
func (m *Metrics) ObserveStageTransition(from, to stage.Stage, d time.Duration) {
	m.stageTransition.WithLabelValues(string(from), string(to)).Observe(max(d, 0).Seconds())
}

// CountBuildError counts a failed Build phase.
func (m *Metrics) CountBuildError(plugin string) {
	m.buildErrors.WithLabelValues(plugin).Inc()
}

// ServeTrainJobs makes the trainjobs gauge count the TrainJobs of the
// informer informers has for them, until ctx ends. The operator calls it
// once it leads, with its cache, so that a replica that does not lead
// reports nothing. The counts follow the informer's events (the ones it
// already holds arrive as adds), so a scrape reads a few numbers: listing
// the cache at each scrape would copy every TrainJob, garbage that grows
// with the TrainJobs at every scrape.
func ServeTrainJobs(ctx context.Context, informers cache.Informers) error {
	informer, err := informers.GetInformer(ctx, &trainer.TrainJob{})
	if err != nil {
		return fmt.Errorf("the TrainJob informer: %w", err)
	}
	src := &stageCounts{counts: make(map[stage.Stage]int, len(stage.All))}
	registration, err := informer.AddEventHandler(src.handler())
	if err != nil {
		return fmt.Errorf("counting TrainJobs: %w", err)
	}
	trainJobs.src.Store(src)
	<-ctx.Done()
	trainJobs.src.CompareAndSwap(src, nil)
	// The informer may have stopped with the manager already.
	_ = informer.RemoveEventHandler(registration)
	return nil
}

// stageCounts are the TrainJobs of each stage.
type stageCounts struct {
	mu     sync.Mutex
	counts map[stage.Stage]int
}

// handler keeps c in step with an informer's events. A delete the informer learns of only when it lists again
// (its watch broke meanwhile) comes as a tombstone holding the last state it saw.
func (c *stageCounts) handler() toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.count(obj, 1) },
		UpdateFunc: func(old, obj any) { c.count(old, -1); c.count(obj, 1) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			c.count(obj, -1)
		},
	}
}

func (c *stageCounts) count(obj any, n int) {
	tj, ok := obj.(*trainer.TrainJob)
	if !ok {
		return
	}
	s := stage.Of(tj)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[s] += n
}

// stageCollector reports the counts of the stageCounts it serves.
type stageCollector struct {
	desc *prometheus.Desc
	src  atomic.Pointer[stageCounts]
}

func (c *stageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stageCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.src.Load()
	if src == nil {
		return
	}
	src.mu.Lock()
	counts := maps.Clone(src.counts)
	src.mu.Unlock()
	for _, s := range stage.All {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}
