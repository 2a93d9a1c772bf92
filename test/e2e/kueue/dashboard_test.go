package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/cmdutil"
	"github.com/kubectl-trainjob/kubectl-trainjob/plugin/dashboard"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
	"github.com/kubectl-trainjob/kubectl-trainjob/test/stack"
)

// TestDashboardQueue: the dashboard's list pushes a change of a TrainJob's Kueue Workload as it happens, not at
// its next refresh (an hour here, so that only a watch can bring it in time): a Queued TrainJob whose Workload
// is stopped (spec.active false, as suspend does) shows Suspended, and Queued again with Kueue's reason once
// it is requeued. A user who may list the TrainJobs but not the Workloads still gets the list, with the stages
// the TrainJobs alone tell, and its changes.
func TestDashboardQueue(t *testing.T) {
	ns := queueNamespace(t)
	tj := gpuTrainJob(ns, "too-big", "")
	tj.Spec.Trainer.NumNodes = ptr.To[int32](3) // 3 × 8 GPUs: more than the ClusterQueue has, so it waits
	create(t, tj)
	cluster.Eventually(t, "too-big's Workload not admitted for lack of GPUs", waitTimeout, func(ctx context.Context) error {
		wl, err := workloadOf(ctx, tj)
		if err != nil {
			return err
		}
		if c := condition(wl, "QuotaReserved"); c["status"] != "False" {
			return fmt.Errorf("QuotaReserved %v", c)
		}
		return nil
	})
	setActive := func(active bool) {
		t.Helper()
		wl, err := workloadOf(t.Context(), tj)
		if err != nil {
			t.Fatal(err)
		}
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"active":%t}}`, active))
		if err := suite.client.Patch(t.Context(), wl, patch); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("workload-change-pushed", func(t *testing.T) {
		seen := listEvents(t, startDashboard(t, ns))
		seen("too-big", stage.Queued)
		setActive(false)
		seen("too-big", stage.Suspended)
		setActive(true)
		seen("too-big", stage.Queued)
	})

	t.Run("workloads-forbidden", func(t *testing.T) {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainjob-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"trainjobs", "trainingruntimes"},
				Verbs: []string{"get", "list", "watch"}}}}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainjob-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}}
		for _, obj := range []client.Object{role, binding} {
			if err := suite.client.Create(t.Context(), obj); err != nil {
				t.Fatal(err)
			}
		}
		seen := listEvents(t, startDashboard(t, ns, "--as", "alice"))
		seen("too-big", stage.Suspended)
		other := gpuTrainJob(ns, "other", "")
		other.Spec.Trainer.NumNodes = tj.Spec.Trainer.NumNodes // waits too, suspended
		create(t, other)
		seen("other", stage.Suspended)
	})
}

// dashboardURL is the URL `kubectl trainjob dashboard` prints, with its token.
var dashboardURL = regexp.MustCompile(`http://\S+\?token=\S+`)

// dashboardPage is a browser's client of a running dashboard: it has opened the URL the command printed, so it
// holds the token's cookie.
type dashboardPage struct {
	base   string
	client *http.Client
}

// startDashboard runs `kubectl trainjob dashboard -n ns ARGS…` in-process until the test ends, pushing the
// page again only every hour while nothing changes, and opens the URL it prints.
func startDashboard(t *testing.T, ns string, args ...string) *dashboardPage {
	t.Helper()
	out := &cluster.SyncBuffer{}
	o := dashboard.NewDashboardOptions(cmdutil.Streams{In: strings.NewReader(""), Out: out, ErrOut: out})
	o.Resync = time.Hour
	root := plugin.NewRootCommand(cmdutil.NewFactory(), o.Streams, func(f cmdutil.Factory, _ cmdutil.Streams) *cobra.Command {
		return dashboard.NewCmdDashboardWithOptions(f, o)
	})
	root.SetArgs(append([]string{"dashboard", "--port", "0", "-n", ns, "--kubeconfig", suite.cluster.KubeconfigPath}, args...))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var printed string
	cluster.Eventually(t, "the dashboard's URL", time.Minute, func(context.Context) error {
		if printed = dashboardURL.FindString(out.String()); printed == "" {
			return fmt.Errorf("it printed %q", out.String())
		}
		return nil
	})
	jar, _ := cookiejar.New(nil)
	p := &dashboardPage{client: &http.Client{Jar: jar}}
	if _, err := stack.Get(t.Context(), p.client, printed); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(printed)
	p.base = u.Scheme + "://" + u.Host
	return p
}

// listEvents follows the page's list (/api/watch); the function it returns waits until a pushed list shows
// TrainJob name in stage st, and fails the test if none does within a minute.
func listEvents(t *testing.T, p *dashboardPage) func(name string, st stage.Stage) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	events, err := stack.Events(ctx, p.client, p.base+"/api/watch")
	if err != nil {
		t.Fatal(err)
	}
	return func(name string, st stage.Stage) {
		t.Helper()
		deadline := time.After(time.Minute)
		var last stack.Event
		for {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatalf("the list's stream ended before it showed %s %s; last: %s %s", name, st, last.Name, last.Data)
				}
				last = e
				var l dashboard.TrainJobs
				if e.Name != "trainjobs" || json.Unmarshal([]byte(e.Data), &l) != nil {
					continue
				}
				rows, err := l.Cells()
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					if r["name"] == name && r["stage"] == string(st) {
						return
					}
				}
			case <-deadline:
				t.Fatalf("no list with %s %s pushed within a minute; last: %s %s", name, st, last.Name, last.Data)
			}
		}
	}
}
