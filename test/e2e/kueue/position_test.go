package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/dashboard"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/describe"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// TestQueuePosition: two TrainJobs wait behind one that holds every GPU of the ClusterQueue, the one of lower
// priority behind the other. `status`, the dashboard's list and a TrainJob's page say where each is in its
// queues, as Kueue's visibility API (served by the local cluster) counts: behind another namespace's TrainJob
// of a higher priority in the ClusterQueue (1 and 2 ahead), 0 and 1 ahead in their own LocalQueue. The page of the running one holds its Jobs, its Workload and its runtime snapshot as
// YAML besides the TrainJob and the JobSet, and describe-pipeline's table of what each plugin changed.
func TestQueuePosition(t *testing.T) {
	ns := queueNamespace(t)
	// Kueue orders a ClusterQueue by priority first: the other team's TrainJob, of the default priority, is
	// ahead of next, which is ahead of later.
	low, lower := kueueObject("WorkloadPriorityClass", "", "e2e-low", nil), kueueObject("WorkloadPriorityClass", "", "e2e-lower", nil)
	low.Object["value"], lower.Object["value"] = int64(-10), int64(-20)
	for _, c := range []*unstructured.Unstructured{low, lower} {
		if err := suite.client.Create(t.Context(), c); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	blocker := gpuTrainJob(ns, "blocker", "")
	create(t, blocker)
	waitRunning(t, blocker)
	// Another team's LocalQueue of the same name feeds the same ClusterQueue, and its TrainJob queues first:
	// it is ahead in the ClusterQueue, not in this namespace's LocalQueue (Kueue v0.17.0's visibility API
	// counts it there too: docs/kueue.md).
	team := cluster.NewNamespace(t, suite.client, "kueue-", diagnose)
	if err := suite.cluster.CreateLocalQueue(t.Context(), team); err != nil {
		t.Fatal(err)
	}
	other := gpuTrainJob(team, "other", "")
	create(t, other)
	const why = "insufficient unused quota for nvidia.com/gpu in flavor gpu-node, 16 more needed"
	waitQueued := func(tj *trainer.TrainJob) {
		cluster.Eventually(t, tj.Name+"'s Workload queued, not admitted for lack of GPUs", waitTimeout, func(ctx context.Context) error {
			wl, err := workloadOf(ctx, tj)
			if err != nil {
				return err
			}
			if c := condition(wl, "QuotaReserved"); c["status"] != "False" || !strings.Contains(fmt.Sprint(c["message"]), why) {
				return fmt.Errorf("QuotaReserved %v", c)
			}
			return nil
		})
	}
	waitQueued(other)
	next, later := gpuTrainJob(ns, "next", low.GetName()), gpuTrainJob(ns, "later", lower.GetName())
	create(t, next)
	create(t, later)
	waitQueued(next)
	waitQueued(later)
	position := map[string]string{
		next.Name:  "1 ahead in ClusterQueue gpu-cq, 0 in LocalQueue gpu",
		later.Name: "2 ahead in ClusterQueue gpu-cq, 1 in LocalQueue gpu",
	}
	if q := summary(t, team, other.Name).Queue; q == nil || q.Position != "0 ahead in ClusterQueue gpu-cq, 0 in LocalQueue gpu" {
		t.Errorf("status %s/%s -o json: queue %+v, want it first in both queues", team, other.Name, q)
	}

	t.Run("status", func(t *testing.T) {
		for name, want := range position {
			if q := summary(t, ns, name).Queue; q == nil || q.Position != want {
				t.Errorf("status %s -o json: queue %+v, want position %q", name, q, want)
			}
			screen := inProcess(t, ns, time.Now(), "status", name)
			if !regexp.MustCompile(`(?m)^  Position:\s+` + regexp.QuoteMeta(want) + `$`).MatchString(screen) {
				t.Errorf("status %s does not print position %q:\n%s", name, want, screen)
			}
		}
	})

	p := startDashboard(t, ns)
	t.Run("dashboard-list", func(t *testing.T) {
		var l dashboard.TrainJobs
		p.getJSON(t, "/api/trainjobs", &l)
		cells, err := l.Cells()
		if err != nil {
			t.Fatal(err)
		}
		rows := map[string]string{}
		for _, r := range cells {
			rows[r["name"].(string)] = fmt.Sprintf("%s, reason %q, position %q", r["stage"], r["reason"], r["position"])
		}
		for name, want := range map[string]string{
			next.Name:  fmt.Sprintf("%s, reason %q, position %q", stage.Queued, why, position[next.Name]),
			later.Name: fmt.Sprintf("%s, reason %q, position %q", stage.Queued, why, position[later.Name]),
		} {
			if rows[name] != want {
				t.Errorf("the list's row of %s: %s; want %s", name, rows[name], want)
			}
		}
		if r := rows[blocker.Name]; strings.HasPrefix(r, string(stage.Queued)) || !strings.HasSuffix(r, `position ""`) {
			t.Errorf("the list's row of %s: %s; want it admitted, without a position", blocker.Name, r)
		}
	})

	t.Run("dashboard-trainjob", func(t *testing.T) {
		var queued dashboard.TrainJob
		p.getJSON(t, "/api/trainjobs/"+ns+"/"+next.Name, &queued)
		if q := queued.Summary.Queue; q == nil || q.Position != position[next.Name] {
			t.Errorf("the page of %s: queue %+v, want position %q", next.Name, q, position[next.Name])
		}
		var got dashboard.TrainJob
		cluster.Eventually(t, "the page of "+blocker.Name+" with its Job's 2 active pods", waitTimeout, func(context.Context) error {
			got = dashboard.TrainJob{}
			p.getJSON(t, "/api/trainjobs/"+ns+"/"+blocker.Name, &got)
			if len(got.Jobs) != 1 || got.Jobs[0].Name != blocker.Name+"-node-0" || got.Jobs[0].Active != 2 || got.Jobs[0].Completions != "2" {
				return fmt.Errorf("jobs %+v, want %s-node-0 with 2 active of 2 completions", got.Jobs, blocker.Name)
			}
			return nil
		})
		for what, y := range map[string]struct{ yaml, want string }{
			"Workload":         {got.WorkloadYAML, "name: trainjob-" + blocker.Name + "-"},
			"runtime snapshot": {got.RuntimeYAML, "kind: ClusterTrainingRuntime"},
			"JobSet":           {got.JobSetYAML, "kind: JobSet"},
		} {
			if !strings.Contains(y.yaml, y.want) {
				t.Errorf("the %s's YAML lacks %q:\n%s", what, y.want, y.yaml)
			}
		}

		var d describe.Description
		p.getJSON(t, "/api/trainjobs/"+ns+"/"+blocker.Name+"/pipeline", &d)
		var plugins []string
		for _, ph := range d.Phases {
			for _, pt := range ph.Points {
				for _, pl := range pt.Plugins {
					if len(pl.Changes) > 0 {
						plugins = append(plugins, ph.Name+"/"+pt.Name+"/"+pl.Name)
					}
				}
			}
		}
		if !strings.HasPrefix(d.Runtime, "ClusterTrainingRuntime/torch-distributed") || len(plugins) == 0 || d.Now == nil {
			t.Errorf("describe-pipeline: runtime %q, now %+v, plugins that changed something %q; want the torch-distributed runtime's pipeline",
				d.Runtime, d.Now, plugins)
		}
	})
}

// getJSON GETs path of the dashboard into v, and fails the test unless it answers 200 with JSON.
func (p *dashboardPage) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := stack.Get(t.Context(), p.client, p.base+path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}
