package operator

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// grant is one verb on one resource: of the ClusterRole, or of the Role in the operator's namespace
// (namespaced), restricted to names when they are given.
type grant struct {
	namespaced bool
	group      string
	resource   string
	verb       string
	names      string // comma-separated, sorted; "" is every name
}

func (g grant) String() string {
	role := "ClusterRole"
	if g.namespaced {
		role = "Role"
	}
	s := fmt.Sprintf("%s %s/%s %s", role, g.group, g.resource, g.verb)
	if g.names != "" {
		s += " [" + g.names + "]"
	}
	return s
}

// need is what the operator needs a rule for: the code path that makes the request (a function or
// method of this repository, package folder from the repository root) and why.
type need struct {
	namespaced bool
	group      string
	resources  []string
	verbs      []string
	names      []string
	code       []string // "pkg/operator/apply.Applier.ensure"
	why        string
}

// needs are the operator's permissions, each with the code path that uses it. Every rule of
// config/rbac/role.yaml must be here and nothing else: a verb no code path needs is dropped from the
// markers (rbac.go); a new request the code makes adds its rule here.
var needs = []need{
	{group: "resource.k8s.io", resources: []string{"resourceclaimtemplates"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/pipeline.ClaimDeviceRequests"}, why: "the GPUs of a pod's DRA claims, from the cache"},
	{group: "resource.k8s.io", resources: []string{"resourceclaims"}, verbs: []string{"get"},
		code: []string{"pkg/pipeline.ClaimDeviceRequests", "pkg/operator.liveOnMiss.Get"}, why: "the GPUs of a claim a runtime names, read live"},
	{group: "trainer.kubeflow.org", resources: []string{"trainjobs"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/operator/controller.TrainJobReconciler.SetupWithManager"}, why: "the TrainJob controller's cache"},
	{group: "trainer.kubeflow.org", resources: []string{"trainjobs"}, verbs: []string{"get"},
		code: []string{"pkg/operator/apply.Applier.ownerLive"}, why: "is a TrainJob built before being deleted, before its missing child is created again"},
	{group: "trainer.kubeflow.org", resources: []string{"trainjobs/status"}, verbs: []string{"update"},
		code: []string{"pkg/operator/apply.Applier.WriteStatus"}, why: "conditions and jobsStatus, written once per reconcile"},
	{group: "trainer.kubeflow.org", resources: []string{"trainjobs/status"}, verbs: []string{"patch"},
		code: []string{"pkg/operator/statusserver.Server.updateStatus"}, why: "trainers' progress reports, server-side applied"},
	{group: "trainer.kubeflow.org", resources: []string{"trainjobs/finalizers"}, verbs: []string{"update"},
		code: []string{"pkg/pipeline.OwnedObjectMeta", "pkg/snapshot.NewConfigMap"},
		why:  "children's ownerReferences with blockOwnerDeletion (OwnerReferencesPermissionEnforcement)"},
	{group: "trainer.kubeflow.org", resources: []string{"trainjobs"}, verbs: []string{"create"},
		code: []string{"pkg/operator/controller.OptimizationJobReconciler.createTrials"}, why: "an OptimizationJob's trials"},
	{group: "trainer.kubeflow.org", resources: []string{"optimizationjobs"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/operator/controller.OptimizationJobReconciler.SetupWithManager"}, why: "the OptimizationJob controller's cache"},
	{group: "trainer.kubeflow.org", resources: []string{"optimizationjobs"}, verbs: []string{"patch"},
		code: []string{"pkg/operator/controller.OptimizationJobReconciler.recordCreated"}, why: "the count of trials created, in an annotation"},
	{group: "trainer.kubeflow.org", resources: []string{"optimizationjobs/status"}, verbs: []string{"update"},
		code: []string{"pkg/operator/controller.OptimizationJobReconciler.writeStatus"}, why: "conditions and result, written once per reconcile"},
	{group: "trainer.kubeflow.org", resources: []string{"optimizationjobs/finalizers"}, verbs: []string{"update"},
		code: []string{"pkg/optimization.NewTrial"}, why: "trials' ownerReferences with blockOwnerDeletion (OwnerReferencesPermissionEnforcement)"},
	{group: "trainer.kubeflow.org", resources: []string{"clustertrainingruntimes", "trainingruntimes"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/snapshot.LiveRuntime", "pkg/operator/controller.RuntimeFinalizerReconciler.setup"}, why: "runtimes read from the cache"},
	{group: "trainer.kubeflow.org", resources: []string{"clustertrainingruntimes", "trainingruntimes"}, verbs: []string{"get"},
		code: []string{"pkg/snapshot.LiveRuntime"}, why: "a runtime the cache does not have yet, read live"},
	{group: "trainer.kubeflow.org", resources: []string{"clustertrainingruntimes", "trainingruntimes"}, verbs: []string{"patch"},
		code: []string{"pkg/operator/controller.RuntimeFinalizerReconciler.Reconcile"}, why: "takes off the legacy finalizer"},
	{group: "jobset.x-k8s.io", resources: []string{"jobsets"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/pipeline/plugins/jobset.JobSet.ReconcilerBuilders"}, why: "JobSets the TrainJobs control, in the cache"},
	{group: "jobset.x-k8s.io", resources: []string{"jobsets"}, verbs: []string{"get"},
		code: []string{"pkg/operator/apply.Applier.current", "pkg/operator/apply.Applier.child", "pkg/operator/apply.Applier.takeOverCreate", "pkg/operator/statusserver.Server.trainJobOfPod"},
		why:  "read live when the cache may be behind the operator's own write"},
	{group: "jobset.x-k8s.io", resources: []string{"jobsets"}, verbs: []string{"create"},
		code: []string{"pkg/operator/apply.creator.create"}, why: "the first write of a child"},
	{group: "jobset.x-k8s.io", resources: []string{"jobsets"}, verbs: []string{"patch"},
		code: []string{"pkg/operator/apply.Applier.ensure"}, why: "server-side apply of a changed child"},
	{group: "jobset.x-k8s.io", resources: []string{"jobsets"}, verbs: []string{"delete"},
		code: []string{"pkg/operator/apply.Applier.Delete"}, why: "the JobSet of a TrainJob past activeDeadlineSeconds"},
	{group: "scheduling.x-k8s.io", resources: []string{"podgroups"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/pipeline/podgroup.ReconcilerBuilders"}, why: "PodGroups the TrainJobs control, in the cache"},
	{group: "scheduling.volcano.sh", resources: []string{"podgroups"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/pipeline/podgroup.ReconcilerBuilders"}, why: "PodGroups the TrainJobs control, in the cache"},
	{group: "scheduling.x-k8s.io", resources: []string{"podgroups"}, verbs: []string{"get", "create", "patch"},
		code: []string{"pkg/operator/apply.Applier.current", "pkg/operator/apply.creator.create", "pkg/operator/apply.Applier.ensure"},
		why:  "read live, created, then server-side applied, as JobSets"},
	{group: "scheduling.volcano.sh", resources: []string{"podgroups"}, verbs: []string{"get", "create", "patch"},
		code: []string{"pkg/operator/apply.Applier.current", "pkg/operator/apply.creator.create", "pkg/operator/apply.Applier.ensure"},
		why:  "read live, created, then server-side applied, as JobSets"},
	{group: "", resources: []string{"configmaps", "secrets"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/operator.cacheOptions", "pkg/pipeline.OwnsNamed"},
		why:  "the operator's own (runtime snapshots, MPI keys and hostfiles), selected by its label; RBAC cannot grant by label"},
	{group: "", resources: []string{"configmaps", "secrets"}, verbs: []string{"get"},
		code: []string{"pkg/operator.liveOnMiss.Get", "pkg/snapshot.Read", "pkg/operator/apply.Applier.current"},
		why:  "one the label-scoped cache does not hold yet, read live"},
	{group: "", resources: []string{"configmaps", "secrets"}, verbs: []string{"create", "patch"},
		code: []string{"pkg/operator/apply.creator.create", "pkg/operator/apply.Applier.ensure", "pkg/operator.certSync.issued"},
		why:  "snapshots, MPI Secrets and hostfiles: created, then server-side applied; the webhook certificate Secret, created again when it is gone (RBAC cannot grant a create by name)"},
	{group: "", resources: []string{"limitranges"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/pipeline/podgroup.ReconcilerBuilders"}, why: "requeue suspended gang-scheduled TrainJobs of a namespace"},
	{group: "node.k8s.io", resources: []string{"runtimeclasses"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/pipeline/podgroup.ReconcilerBuilders"}, why: "requeue suspended gang-scheduled TrainJobs using a RuntimeClass"},
	{group: "scheduling.k8s.io", resources: []string{"priorityclasses"}, verbs: []string{"list", "watch"},
		code: []string{"pkg/pipeline/plugins/volcano.Volcano.Validate"}, why: "the PriorityClasses a Volcano TrainJob names exist"},
	{group: "events.k8s.io", resources: []string{"events"}, verbs: []string{"create", "patch"},
		code: []string{"pkg/operator/eventrecorder.Recorder.writeOnce"}, why: "an Event per transition; a repeat patches its series"},
	{group: "", resources: []string{"events"}, verbs: []string{"create", "patch"},
		code: []string{"pkg/operator.New"}, why: "leader election's Events (controller-runtime's core recorder)"},
	{group: "authentication.k8s.io", resources: []string{"tokenreviews"}, verbs: []string{"create"},
		code: []string{"pkg/operator.New", "pkg/operator/statusserver.Server.review"}, why: "who scrapes /metrics, who reports to the status server"},
	{group: "", resources: []string{"pods"}, verbs: []string{"get"},
		code: []string{"pkg/operator/statusserver.Server.trainJobOfPod"}, why: "the pod a reporting trainer's token is bound to, and its controller"},
	{group: "batch", resources: []string{"jobs"}, verbs: []string{"get"},
		code: []string{"pkg/operator/statusserver.Server.trainJobOfPod"}, why: "the Job between a reporting pod and its JobSet"},
	{group: "authorization.k8s.io", resources: []string{"subjectaccessreviews"}, verbs: []string{"create"},
		code: []string{"pkg/operator.New"}, why: "whether a scraper may get /metrics"},
	{group: "admissionregistration.k8s.io", resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
		verbs: []string{"get", "list", "watch", "update"}, names: []string{"defaulter.trainer.kubeflow.org", "validator.trainer.kubeflow.org"},
		code: []string{"pkg/operator.addCertRotation", "pkg/operator.listedByName", "pkg/operator.certSync.inject"}, why: "certificate rotation injects the CA into the operator's two webhook configurations"},
	{namespaced: true, group: "", resources: []string{"secrets"}, verbs: []string{"get", "list", "watch", "update"}, names: []string{"kubectl-trainjob-webhook-cert"},
		code: []string{"pkg/operator.addCertRotation", "pkg/operator.certSync.issued", "pkg/operator.addSecretCA"},
		why:  "the webhook serving certificate: rotated, and copied to the server's folder; its CA kept in memory for the trainers"},
	{namespaced: true, group: "coordination.k8s.io", resources: []string{"leases"}, verbs: []string{"get", "create", "update"},
		code: []string{"pkg/operator.New"}, why: "leader election"},
}

func (n need) grants() []grant {
	var out []grant
	names := slices.Clone(n.names)
	slices.Sort(names)
	for _, r := range n.resources {
		for _, v := range n.verbs {
			out = append(out, grant{namespaced: n.namespaced, group: n.group, resource: r, verb: v, names: strings.Join(names, ",")})
		}
	}
	return out
}

// roleGrants are the grants of config/rbac/role.yaml.
func roleGrants(t *testing.T) []grant {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []grant
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var role rbacv1.ClusterRole // a Role has the same rules
		if err := dec.Decode(&role); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			names := slices.Clone(r.ResourceNames)
			slices.Sort(names)
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out = append(out, grant{namespaced: role.Kind == "Role", group: g, resource: res, verb: v, names: strings.Join(names, ",")})
					}
				}
			}
		}
	}
	return out
}

// TestEveryRuleHasACodePath: the rules config/rbac grants are exactly the ones needs lists, and every code
// path named there exists.
func TestEveryRuleHasACodePath(t *testing.T) {
	granted := roleGrants(t)
	var needed []grant
	for _, n := range needs {
		needed = append(needed, n.grants()...)
	}
	for _, g := range granted {
		if !slices.Contains(needed, g) {
			t.Errorf("config/rbac grants %s, which no code path in needs uses: drop it from rbac.go, or name the code that needs it", g)
		}
	}
	for _, g := range needed {
		if !slices.Contains(granted, g) {
			t.Errorf("needs lists %s, which config/rbac does not grant: add it to rbac.go and run make generate", g)
		}
	}
	decls := map[string]map[string]bool{} // package folder → declared functions and methods
	for _, n := range needs {
		if len(n.code) == 0 || n.why == "" {
			t.Errorf("%v: no code path or no reason", n.grants())
		}
		for _, c := range n.code {
			dir, name, ok := strings.Cut(c, ".")
			if !ok {
				t.Errorf("code path %q is not folder.Function or folder.Type.Method", c)
				continue
			}
			if decls[dir] == nil {
				decls[dir] = declared(t, filepath.Join("..", "..", dir))
			}
			if !decls[dir][name] {
				t.Errorf("code path %s: %s declares no %s", c, dir, name)
			}
		}
	}
}

// declared are the functions ("New") and methods ("Server.Start") of the package in dir, tests left out.
func declared(t *testing.T, dir string) map[string]bool {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				name := fn.Name.Name
				if fn.Recv != nil && len(fn.Recv.List) == 1 {
					name = receiverType(fn.Recv.List[0].Type) + "." + name
				}
				out[name] = true
			}
		}
	}
	return out
}

func receiverType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverType(x.X)
	case *ast.IndexExpr: // a generic type
		return receiverType(x.X)
	case *ast.IndexListExpr:
		return receiverType(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// TestDocsListEveryRule: the Permissions table of docs/reliability.md has a row for every resource the operator
// is granted, with its verbs.
func TestDocsListEveryRule(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "reliability.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Permissions\n")
	if !ok {
		t.Fatal("docs/reliability.md has no ## Permissions section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| ") {
			rows = append(rows, line)
		}
	}
	for _, n := range needs {
		for _, g := range n.grants() {
			if !slices.ContainsFunc(rows, func(row string) bool {
				cells := strings.Split(row, "|")
				return len(cells) > 3 && strings.Contains(cells[2], g.resource) && strings.Contains(cells[3], g.verb) &&
					(g.names == "" || strings.Contains(cells[2], strings.Split(g.names, ",")[0]))
			}) {
				t.Errorf("docs/reliability.md's Permissions table has no row granting %s", g)
			}
		}
	}
}
