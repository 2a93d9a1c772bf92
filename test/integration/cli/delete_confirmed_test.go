package cli

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// holdFinalizer keeps a deleted TrainJob in the API server (nothing here removes it but the test), so that
// `delete --wait` has something to wait for.
const holdFinalizer = "test.kubectl-trainjob.io/hold"

// TestDeleteOnlyWhatWasConfirmed: `delete` deletes only the TrainJob the user saw in the prompt, and its
// --wait tells a TrainJob from a new one of the same name and stops on an error instead of polling forever.
func TestDeleteOnlyWhatWasConfirmed(t *testing.T) {
	c := sharedCluster(t)

	t.Run("re-created while the prompt waits", func(t *testing.T) {
		f := fixtureOn(t, c)
		first := f.trainJob("llama", 1, false)
		stdin, answer := io.Pipe()
		defer answer.Close()
		run := StartReading(t, cmdutil.NewFactory(), stdin, []plugin.CommandAdder{deleteCmd(true)}, withArgs(kubeArgs(c, f.ns), "delete", "llama")...)
		run.WaitForOutput(t, "Delete 1 TrainJob? [y/N]: ")

		// Someone else deletes llama and creates another one of the same name while the prompt is open.
		if err := f.c.Delete(t.Context(), first); err != nil {
			t.Fatal(err)
		}
		cluster.Eventually(t, "the first llama is gone", waitTimeout, cluster.Holds(func(context.Context) (bool, error) { return !f.exists("llama"), nil }))
		second := f.trainJob("llama", 1, false)
		if _, err := io.WriteString(answer, "y\n"); err != nil {
			t.Fatal(err)
		}
		res := run.Wait(t)
		got := &trainer.TrainJob{}
		if err := f.c.Get(t.Context(), client.ObjectKeyFromObject(second), got); err != nil {
			t.Fatalf("the TrainJob created while the prompt waited was deleted: %v", err)
		}
		if got.UID != second.UID || got.DeletionTimestamp != nil {
			t.Errorf("llama is %s (deleted at %v), want the new one %s untouched", got.UID, got.DeletionTimestamp, second.UID)
		}
		AssertGolden(t, "delete-confirmed/recreated-during-prompt", f.normalizer(first).Normalize(res.String()))
	})

	t.Run("--wait sees a new TrainJob of the same name", func(t *testing.T) {
		f := fixtureOn(t, c)
		first := f.trainJob("held", 1, false, func(tj *trainer.TrainJob) { tj.Finalizers = []string{holdFinalizer} })
		gate := &requestGate{path: "/namespaces/" + f.ns + "/trainjobs/held"}
		run := StartWith(t, factorySeeing(gate.wait), "", []plugin.CommandAdder{deleteCmd(false)}, withArgs(kubeArgs(c, f.ns), "delete", "held", "-y", "--timeout=30s")...)
		run.WaitForOutput(t, `"held" deleted`)

		// The old held goes and a new one comes while --wait's reads are held back, so that it never sees
		// the name free: only the UID tells the new TrainJob from the one it deleted.
		gate.close()
		patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))
		if err := f.c.Patch(t.Context(), first, patch); err != nil {
			t.Fatal(err)
		}
		cluster.Eventually(t, "the first held is gone", waitTimeout, cluster.Holds(func(context.Context) (bool, error) { return !f.exists("held"), nil }))
		second := f.trainJob("held", 1, false)
		gate.open()

		res := run.Wait(t)
		if res.Code != 0 {
			t.Errorf("delete --wait of a TrainJob replaced by a new one of the same name: exit code %d, want 0\n%s", res.Code, res)
		}
		got := &trainer.TrainJob{}
		if err := f.c.Get(t.Context(), client.ObjectKeyFromObject(second), got); err != nil || got.DeletionTimestamp != nil {
			t.Errorf("the new held: %v, deletionTimestamp %v; want it untouched", err, got.DeletionTimestamp)
		}
	})

	t.Run("--wait stops on an error", func(t *testing.T) {
		f := fixtureOn(t, c)
		tj := f.trainJob("kept", 1, false, func(tj *trainer.TrainJob) { tj.Finalizers = []string{holdFinalizer} })
		t.Cleanup(func() {
			_ = f.c.Patch(t.Context(), tj, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))
		})
		grantNamespaceUser(t, f.c, "bob", f.ns)
		// No --timeout: it would wait as long as it takes, so only giving up on the error ends it.
		run := Start(t, "", []plugin.CommandAdder{deleteCmd(false)}, withArgs(kubeArgs(c, f.ns), "--as", "bob", "delete", "kept", "-y")...)
		run.WaitForOutput(t, `"kept" deleted`)
		// bob loses the right to read TrainJobs while the command waits.
		if err := f.c.Delete(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "bob"}}); err != nil {
			t.Fatal(err)
		}
		res := run.Wait(t)
		if res.Code != cmdutil.ExitError || !strings.Contains(res.Stderr, "forbidden") {
			t.Errorf("delete --wait whose reads are forbidden: exit code %d, want %d with the API server's error\n%s", res.Code, cmdutil.ExitError, res)
		}
		if err := f.c.Get(t.Context(), client.ObjectKeyFromObject(tj), &trainer.TrainJob{}); apierrors.IsNotFound(err) {
			t.Error("kept is gone: the finalizer should have held it")
		}
	})
}

// requestGate holds back the GETs of one object's path while it is closed.
type requestGate struct {
	path   string
	mu     sync.Mutex
	opened chan struct{} // closed while the gate is open; nil before the first close
}

func (g *requestGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.opened = make(chan struct{})
}

func (g *requestGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.opened)
}

func (g *requestGate) wait(r *http.Request) {
	if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, g.path) {
		return
	}
	g.mu.Lock()
	opened := g.opened
	g.mu.Unlock()
	if opened == nil {
		return
	}
	select {
	case <-opened:
	case <-r.Context().Done():
	case <-time.After(time.Minute):
	}
}
