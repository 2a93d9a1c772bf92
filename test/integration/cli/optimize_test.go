package cli

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/optimization/search"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/create"
)

// optimizeRuntime is the ClusterTrainingRuntime the OptimizationJobs' trials run on.
const optimizeRuntime = "optimize-test-torch"

// TestOptimization: optimize makes OptimizationJobs from flags and from a file and refuses a bad search before
// anything is sent, naming the flag; no controller runs, as on a cluster without one.
func TestOptimization(t *testing.T) {
	// Its own API server: it lists OptimizationJobs with -A.
	f, kube, n := runtimeFixture(t, apiCluster(t), optimizeRuntime)
	cl, ns := f.c, f.ns
	cmd := []plugin.CommandAdder{create.NewCmdOptimize}
	optimizeArgs := func(name string, more ...string) []string {
		return slices.Concat(kube, []string{"optimize", name, "--runtime", optimizeRuntime, "--image", "ghcr.io/example/sgd:1.0",
			"--param", "lr=loguniform:1e-5,1e-2", "--param", "batch=categorical:16,32,64", "--objective", "val_loss:min",
			"--trials", "20", "--parallel", "4", "--seed", "7", "--label", "team=nlp"}, more, []string{"--", "python", "train.py"})
	}

	var dryRun *trainer.OptimizationJob
	t.Run("optimize-dry-run-client", func(t *testing.T) {
		res := Run(t, "", cmd, optimizeArgs("sweep", "--dry-run=client", "-o", "yaml")...)
		AssertGolden(t, "optimize/dry-run-client", n.Normalize(res.String()))
		dryRun = &trainer.OptimizationJob{}
		if err := yaml.Unmarshal([]byte(res.Stdout), dryRun); err != nil {
			t.Fatal(err)
		}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "sweep"}, &trainer.OptimizationJob{}); err == nil {
			t.Error("--dry-run=client created the OptimizationJob")
		}
	})
	t.Run("optimize", func(t *testing.T) {
		AssertGolden(t, "optimize/flags", n.Normalize(Run(t, "", cmd, optimizeArgs("sweep")...).String()))
		got := &trainer.OptimizationJob{}
		if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "sweep"}, got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(dryRun.Spec.Parameters, got.Spec.Parameters); diff != "" {
			t.Errorf("created parameters differ from the dry run's (-dry run +created):\n%s", diff)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"dry-run-server", optimizeArgs("sweep-2", "--dry-run=server")},
		{"file", withArgs(kube, "optimize", "-f", filepath.Join("testdata", "optimize", "optimizationjob.yaml"), "-o", "name")},
		{"error-param-syntax", optimizeArgs("bad", "--param", "dropout=uniform:0.5")},
		{"error-param-bounds", optimizeArgs("bad", "--param", "dropout=uniform:0.5,0.1")},
		{"error-grid-continuous", optimizeArgs("bad", "--algorithm", "grid")},
		{"error-no-objective", withArgs(kube, "optimize", "bad", "--runtime", optimizeRuntime, "--param", "lr=uniform:0,1")},
		{"error-runtime", withArgs(kube, "optimize", "bad", "--runtime", "nope", "--param", "lr=uniform:0,1", "--objective", "loss")},
		{"error-exists", optimizeArgs("sweep")},
		{"error-file-and-param", withArgs(kube, "optimize", "-f", filepath.Join("testdata", "optimize", "optimizationjob.yaml"), "--param", "lr=uniform:0,1")},
		{"error-file-is-trainjob", withArgs(kube, "optimize", "-f", filepath.Join("testdata", "create", "trainjob.yaml"))},
	} {
		t.Run("optimize-"+tc.name, func(t *testing.T) {
			AssertGolden(t, "optimize/"+tc.name, n.Normalize(Run(t, "", cmd, tc.args...).String()))
		})
	}
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "bad"}, &trainer.OptimizationJob{}); err == nil {
		t.Error("a refused optimize created the OptimizationJob bad")
	}

	t.Run("status", func(t *testing.T) { testOptimizationStatus(t, f, kube) })
}

// testOptimizationStatus: status of the OptimizationJob sweep that optimize made, whose trials are written as a
// controller makes them (none runs): by its name alone or as optimizationjob/NAME, progress, best trial and the
// trials best first; a trial without our controller's annotation (as upstream's may make it) shows the
// parameters of its environment; a TrainJob with sweep's label that sweep does not control is no trial of it;
// with status.result, the best is the trial it names.
func testOptimizationStatus(t *testing.T, f *fixture, kube []string) {
	oj := &trainer.OptimizationJob{}
	if err := f.c.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: "sweep"}, oj); err != nil {
		t.Fatal(err)
	}
	for i, tr := range []struct {
		lr, batch string
		stage     stage.Stage
		valLoss   string
	}{
		{"0.0031", "32", stage.Complete, "0.31"},
		{"0.00052", "64", stage.Complete, "0.12"},
		{"0.0091", "16", stage.Failed, ""},
		{"0.00011", "32", stage.Training, "0.05"},
		{"0.0002", "16", stage.Pending, ""},
	} {
		optimizationTrial(f, oj, i, search.Assignment{{Name: "lr", Value: tr.lr}, {Name: "batch", Value: tr.batch}}, tr.stage, tr.valLoss,
			func(tj *trainer.TrainJob) {
				if i == 4 { // as a controller without our annotation and labels makes it
					tj.Labels, tj.Annotations = nil, nil
				}
			})
	}
	f.trainJob("impostor", 1, false, func(tj *trainer.TrainJob) { tj.Labels[optimization.JobNameLabel] = "sweep" })

	n := Normalizer{Base: oj.CreationTimestamp.Time, Replace: map[string]string{f.ns: "<ns>"}}
	statusCmds := []plugin.CommandAdder{statusCmd(oj.CreationTimestamp.Add(10*time.Minute), false)}
	run := func(name string, args ...string) {
		t.Run(name, func(t *testing.T) {
			AssertGolden(t, "optimize/"+name, n.Normalize(Run(t, "", statusCmds, withArgs(kube, args...)...).String()))
		})
	}
	run("status", "status", "sweep")
	run("status-prefixed-json", "status", "optimizationjob/sweep", "-o", "json")
	t.Run("status-trial", func(t *testing.T) { // a trial is a TrainJob; its times are its own
		tj := &trainer.TrainJob{}
		if err := f.c.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: "sweep-1"}, tj); err != nil {
			t.Fatal(err)
		}
		cmds := []plugin.CommandAdder{statusCmd(tj.CreationTimestamp.Add(10*time.Minute), false)}
		AssertGolden(t, "optimize/status-trial", f.normalizer(tj).Normalize(Run(t, "", cmds, withArgs(kube, "status", "sweep-1")...).String()))
	})
	run("status-not-found", "status", "nope")
	run("status-prefixed-not-found", "status", "optimizationjob/nope")
	run("status-watch", "status", "optimizationjob/sweep", "-w")
	// list --optimizations: sweep, and the OptimizationJob of optimize -f, which has no trial yet.
	// AGE in minutes, the same for from-file, created a moment after sweep.
	listCmds := []plugin.CommandAdder{listCmd(oj.CreationTimestamp.Add(11*time.Minute + 30*time.Second))}
	list := func(name string, args ...string) {
		t.Run(name, func(t *testing.T) {
			AssertGolden(t, "optimize/"+name, n.Normalize(Run(t, "", listCmds, withArgs(kube, args...)...).String()))
		})
	}
	list("list", "list", "--optimizations")

	oj.Status = &trainer.OptimizationJobStatus{
		Conditions: []metav1.Condition{{Type: optimization.Complete, Status: metav1.ConditionTrue, Reason: optimization.MaxTrialsReachedReason,
			Message: "20 of 20 trials ended", LastTransitionTime: metav1.NewTime(oj.CreationTimestamp.Add(9 * time.Minute))}},
		Result: trainer.Result{TrainJobName: "sweep-0", Parameters: []trainer.ParameterAssignment{{Name: "lr", Value: "0.0031"}, {Name: "batch", Value: "32"}}},
	}
	f.updateStatus(oj) // the controller's word wins, even for a trial whose report is not the lowest
	run("status-result", "status", "OptimizationJobs/sweep")

	list("list-wide", "list", "--optimizations", "-o", "wide")
	list("list-name", "list", "--optimizations", "-o", "name")
	list("list-all-namespaces", "list", "--optimizations", "-A")
	list("list-stage", "list", "--optimizations", "--stage", "Training")

	// delete: an OptimizationJob only by its kind, with its trials in the prompt; a trial alone says whose it is.
	del := func(name, stdin string, terminal bool, args ...string) {
		t.Run(name, func(t *testing.T) {
			AssertGolden(t, "optimize/"+name, n.Normalize(Run(t, stdin, []plugin.CommandAdder{deleteCmd(terminal)}, withArgs(kube, args...)...).String()))
		})
	}
	del("delete-by-name", "", false, "delete", "sweep", "-y")
	del("delete-no-terminal", "", false, "delete", "optimizationjob/sweep")
	del("delete-answer-no", "n\n", true, "delete", "optimizationjob/sweep", "optimizationjob/from-file")
	del("delete-trial-answer-no", "n\n", true, "delete", "sweep-1")
	del("delete-not-found", "", false, "delete", "optimizationjob/nope", "-y")
	for _, name := range []string{"sweep", "from-file"} {
		if err := f.c.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, &trainer.OptimizationJob{}); err != nil {
			t.Fatalf("OptimizationJob %s before delete was answered yes: %v", name, err)
		}
	}
	del("delete-answer-yes", "y\n", true, "delete", "optimizationjob/sweep", "optimizationjob/from-file")
	for _, name := range []string{"sweep", "from-file"} {
		if err := f.c.Get(t.Context(), client.ObjectKey{Namespace: f.ns, Name: name}, &trainer.OptimizationJob{}); !apierrors.IsNotFound(err) {
			t.Errorf("OptimizationJob %s after delete answered yes: %v, want it gone", name, err)
		}
	}
}

// optimizationTrial creates trial i of oj as optimization.NewTrial makes it, changed by mutate, and writes the
// status of a TrainJob in stage st whose trainer last reported valLoss.
func optimizationTrial(f *fixture, oj *trainer.OptimizationJob, i int, a search.Assignment, st stage.Stage, valLoss string, mutate func(*trainer.TrainJob)) {
	f.t.Helper()
	tj, err := optimization.NewTrial(oj, i, a)
	if err != nil {
		f.t.Fatal(err)
	}
	mutate(tj)
	f.create(tj)
	switch st {
	case stage.Complete:
		tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully", metav1.ConditionTrue, at(tj, 3*time.Minute))}
	case stage.Failed:
		tj.Status.Conditions = []metav1.Condition{condition(trainer.TrainJobFailed, "FailedJobs", "jobset failed due to one or more job failures", metav1.ConditionTrue, at(tj, time.Minute))}
	case stage.Training:
		tj.Status.JobsStatus = []trainer.JobStatus{jobStatus("node", 1, 1, 0, 0)}
	}
	if valLoss != "" {
		tj.Status.TrainerStatus = &trainer.TrainerStatus{LastUpdatedTime: at(tj, 2*time.Minute),
			Metrics: []trainer.Metric{{Name: "loss", Value: "9"}, {Name: "val_loss", Value: valLoss}}}
	}
	f.updateStatus(tj)
}
