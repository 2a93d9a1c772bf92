package realnode_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/golden"
)

// tensorBoardPort is where the trainers serve their page (TRAINER_HTTP_PORT), TensorBoard's port.
const tensorBoardPort = "6006"

// portForward forwards a local port to rank 1 of a TrainJob that trains on the real node, through the API
// server and the kubelet's streaming server, and follows the rank when its pod is deleted: the same local
// port then reaches the pod that took its place. What port-forward prints is compared with a golden file
// (testdata/port-forward.golden). KWOK's pods have no streaming server: this is where forwarding is tested.
func (r *realNodeSuite) portForward(t *testing.T) {
	ns := r.namespace(t)
	// Long enough to outlast the subtest, which deletes it.
	tj := torchTrainJob(ns, "llama", 2, stepsEnv(10000),
		corev1.EnvVar{Name: "TRAINER_STEP_PACE", Value: "500ms"}, corev1.EnvVar{Name: "TRAINER_HTTP_PORT", Value: tensorBoardPort})
	if err := r.cl.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	// Its ranks train on the real node, which the next subtests share: they go with the subtest.
	t.Cleanup(func() { r.deleteAndWaitPodsGone(t, tj) })

	port := cluster.FreePortFor(t)
	var stdout, stderr cluster.SyncBuffer
	cmd := exec.Command(r.binary, "port-forward", tj.Name, "-n", ns, fmt.Sprintf("%d:%s", port, tensorBoardPort), "--rank", "1", "--address", "127.0.0.1",
		"--pod-running-timeout", waitTimeout.String())
	cmd.Env = append(os.Environ(), "KUBECONFIG="+r.kubeconfig, "NO_COLOR=1")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	page := func(ctx context.Context) (string, error) {
		if err := exitedEarly(exited); err != nil {
			t.Fatalf("port-forward ended: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		}
		return get(ctx, fmt.Sprintf("http://127.0.0.1:%d/", port))
	}

	// The page of rank 1, through the forwarded port.
	var first string
	r.eventually(t, "rank 1's page at the forwarded port", func(ctx context.Context) (bool, error) {
		var err error
		first, err = page(ctx)
		return err == nil && strings.HasPrefix(first, "rank 1 of 2, started "), fmt.Errorf("%q: %v; port-forward printed:\n%s%s", first, err, stdout.String(), stderr.String())
	})
	forwarded := regexp.MustCompile(`(?m)^Forwarding to pod (\S+), rank 1 of TrainJob llama$`).FindStringSubmatch(stdout.String())
	if forwarded == nil {
		t.Fatalf("port-forward did not say which pod it forwards to:\n%s", stdout.String())
	}
	victim := &corev1.Pod{}
	if err := r.cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: forwarded[1]}, victim); err != nil {
		t.Fatal(err)
	}
	if victim.Spec.NodeName != cluster.RealNodeName {
		t.Fatalf("pod %s runs on %s, want the real node %s", victim.Name, victim.Spec.NodeName, cluster.RealNodeName)
	}

	// Rank 1's pod is deleted: its Job makes another, and port-forward follows the rank to it.
	if err := r.cl.Delete(t.Context(), victim); err != nil {
		t.Fatal(err)
	}
	var second string
	r.eventually(t, "the page of the pod that took the place of "+victim.Name, func(ctx context.Context) (bool, error) {
		if !strings.Contains(stdout.String(), "which took the place of "+victim.Name) {
			return false, fmt.Errorf("port-forward printed:\n%s%s", stdout.String(), stderr.String())
		}
		var err error
		second, err = page(ctx)
		return err == nil && strings.HasPrefix(second, "rank 1 of 2, started ") && second != first, fmt.Errorf("%q (before: %q): %v", second, first, err)
	})

	// Ctrl-C ends it, with exit code 0.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	stopped = true
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("port-forward after Ctrl-C: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(waitTimeout):
		t.Fatalf("port-forward did not end after Ctrl-C:\n%s", stdout.String())
	}
	golden.Assert(t, filepath.Join("testdata", "port-forward.golden"), []byte("exit code: 0\n--- stdout\n"+normalizeForwarding(stdout.String(), port)))
}

// normalizeForwarding makes port-forward's output comparable across runs: the pods' random suffixes become
// <hash1>, <hash2>… in order of appearance, the local port <port>; the lines client-go prints per connection
// are left out, and a "Forwarding from" line that repeats the one before it, as the test's retries make their
// number vary (a request that finds the new pod's server not yet listening ends that forwarding, and port-forward
// forwards to the pod again, saying so on stderr, and client-go says "Forwarding from" once more).
func normalizeForwarding(out string, port int) string {
	suffixes := map[string]string{}
	out = regexp.MustCompile(`(llama-node-0-1-)([a-z0-9]{5})\b`).ReplaceAllStringFunc(out, func(m string) string {
		s := m[len(m)-5:]
		if _, ok := suffixes[s]; !ok {
			suffixes[s] = fmt.Sprintf("<hash%d>", len(suffixes)+1)
		}
		return m[:len(m)-5] + suffixes[s]
	})
	var b strings.Builder
	var last string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "Handling connection for ") || (line == last && strings.HasPrefix(line, "Forwarding from ")) {
			continue
		}
		b.WriteString(line)
		last = line
	}
	return strings.ReplaceAll(b.String(), "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1:<port>")
}

// get reads url with a connection of its own, so that each request goes through port-forward anew.
func get(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(body)), err
}

// exitedEarly is why the command ended, if it did.
func exitedEarly(exited chan error) error {
	select {
	case err := <-exited:
		exited <- err
		if err == nil {
			err = errors.New("exit code 0")
		}
		return err
	default:
		return nil
	}
}

// deleteAndWaitPodsGone deletes tj and waits until no pod of its namespace is left. It runs in a cleanup, after
// the test's context has ended.
func (r *realNodeSuite) deleteAndWaitPodsGone(t *testing.T, tj *trainer.TrainJob) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := r.cl.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Errorf("delete TrainJob %s: %v", tj.Name, err)
		return
	}
	var left []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := r.cl.List(ctx, &pods, client.InNamespace(tj.Namespace)); err != nil {
			return false, nil
		}
		left = podNames(pods.Items)
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("the pods of TrainJob %s after it was deleted: %v; left: %v", tj.Name, err, left)
	}
}
