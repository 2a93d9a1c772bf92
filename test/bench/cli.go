package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// The CLI runs as a ServiceAccount of its own, so that the audit log tells its requests apart.
const (
	cliNamespace      = "bench-cli"
	cliServiceAccount = "cli"
	cliUser           = serviceAccountUserPrefix + cliNamespace + ":" + cliServiceAccount
)

// cliCommand is one command the benchmark times.
type cliCommand struct {
	name string
	argv []string
	// check looks at what it printed.
	check func(stdout string) error
}

// cli times `kubectl get trainjobs`, `kubectl-trainjob list` and `kubectl-trainjob status` on the namespace of
// TrainJobs, interleaved, and counts each one's API requests in the audit log. Every command runs once
// before, so that the discovery cache (its own folder) is warm, as a user's is.
func (b *bench) cli(ctx context.Context) error {
	kubectl, err := kubectlPath()
	if err != nil {
		return err
	}
	common, err := b.cliFlags(ctx)
	if err != nil {
		return err
	}
	common = append(common, "-n", trainJobsNamespace)
	one := trainJob(trainJobsNamespace, 0, false).Name
	listsAll := func(stdout string) error {
		if got := strings.Count(stdout, "\ntj-"); got != b.k.TrainJobs {
			return fmt.Errorf("lists %d TrainJobs of %d", got, b.k.TrainJobs)
		}
		return nil
	}
	commands := []cliCommand{
		{"kubectl get trainjobs", append([]string{kubectl, "get", "trainjobs"}, common...), listsAll},
		{"kubectl trainjob list", append([]string{b.binary, "list"}, common...), listsAll},
		{"kubectl trainjob status " + one, append([]string{b.binary, "status", one}, common...), func(stdout string) error {
			if !strings.Contains(stdout, one) {
				return fmt.Errorf("does not name %s", one)
			}
			return nil
		}},
	}
	b.logf("CLI: %d TrainJobs in %s; each command once to warm the discovery cache, once counted, %d times timed",
		b.k.TrainJobs, trainJobsNamespace, b.k.CLIRuns)
	res := &b.summary.CLI
	res.TrainJobs, res.Runs = b.k.TrainJobs, b.k.CLIRuns
	res.Commands, err = b.timeCommands(ctx, commands)
	return err
}

// timeCommands runs each command once to warm the discovery cache, once more to count its API requests in the
// audit log, then CLIRuns times interleaved, each going first as often as the others.
func (b *bench) timeCommands(ctx context.Context, commands []cliCommand) ([]CLIResult, error) {
	if _, err := b.audit.next(); err != nil { // what came before is not the commands'
		return nil, err
	}
	windows := make([][2]time.Time, len(commands))
	for pass := range 2 {
		for i, c := range commands {
			start := time.Now()
			if _, err := runCommand(ctx, c); err != nil {
				return nil, err
			}
			if pass == 1 {
				windows[i] = [2]time.Time{start, time.Now()}
			}
		}
	}
	times := make([][]float64, len(commands))
	for r := range b.k.CLIRuns {
		for j := range commands {
			i := (r + j) % len(commands)
			d, err := runCommand(ctx, commands[i])
			if err != nil {
				return nil, err
			}
			times[i] = append(times[i], d.Seconds())
		}
	}
	events, err := b.audit.next()
	if err != nil {
		return nil, err
	}
	results := make([]CLIResult, 0, len(commands))
	for i, c := range commands {
		counts := requestCounts{}
		for _, e := range events {
			if e.User.Username == cliUser && !e.RequestReceived.Before(windows[i][0]) && !e.RequestReceived.After(windows[i][1]) {
				counts[e.key()]++
			}
		}
		results = append(results, CLIResult{Name: c.name, Seconds: times[i], Median: median(times[i]), Requests: counts.total(), RequestsBy: counts})
		b.logf("  %s: median %.3fs, %d API requests", c.name, median(times[i]), counts.total())
	}
	return results, nil
}

// runCommand runs c and times it; its output must pass c.check.
func runCommand(ctx context.Context, c cliCommand) (time.Duration, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s: %w\n%s", strings.Join(c.argv, " "), err, stderr.String())
	}
	if err := c.check(stdout.String()); err != nil {
		return d, fmt.Errorf("%s: %w; it printed:\n%s", c.name, err, stdout.String())
	}
	return d, nil
}

// cliFlags are the flags of every CLI command the benchmark runs: the kubeconfig of the CLI's ServiceAccount
// (made on the first call) and a discovery cache of its own.
func (b *bench) cliFlags(ctx context.Context) ([]string, error) {
	kubeconfig := filepath.Join(b.out, "cli", "kubeconfig")
	if !b.cliReady {
		if err := b.cliServiceAccount(ctx, kubeconfig); err != nil {
			return nil, err
		}
		b.cliReady = true
	}
	return []string{"--kubeconfig=" + kubeconfig, "--cache-dir=" + filepath.Join(b.out, "cli", "cache")}, nil
}

// cliServiceAccount creates the CLI's ServiceAccount, lets it do anything (like the cluster's
// administrator, whose certificate the audit policy does not see), and writes its kubeconfig.
func (b *bench) cliServiceAccount(ctx context.Context, kubeconfig string) error {
	if err := b.createNamespace(ctx, cliNamespace); err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: cliNamespace, Name: cliServiceAccount}}
	if err := b.admin.Create(ctx, sa); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-cli-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: cliNamespace, Name: cliServiceAccount}},
	}
	if err := b.admin.Create(ctx, binding); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
		return err
	}
	return stack.ServiceAccountKubeconfig(ctx, b.cluster.Config, cliNamespace, cliServiceAccount, kubeconfig)
}

// kubectlPath is the kubectl that `make tools` built, which every comparison with kubectl runs.
func kubectlPath() (string, error) {
	kubectl := filepath.Join(toolsDir(), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		return "", fmt.Errorf("kubectl not found in %s: run `make tools` (or set %s)", toolsDir(), cluster.ToolsEnv)
	}
	return kubectl, nil
}

// toolsDir is where `make tools` links the local cluster's programs (kubectl among them).
func toolsDir() string {
	if dir := os.Getenv(cluster.ToolsEnv); dir != "" {
		return dir
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return filepath.Join("bin", "tools")
	}
	return filepath.Join(root, "bin", "tools")
}
