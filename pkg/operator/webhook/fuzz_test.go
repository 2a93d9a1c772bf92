package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/pipelinetest"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline/plugins"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// The webhooks FuzzAdmissionReview sends requests to, by the first byte of
// its input.
const (
	toDefaulter = iota
	toTrainJobValidator
	toTrainingRuntimeValidator
	toClusterTrainingRuntimeValidator
	webhooks
)

// FuzzAdmissionReview sends any bytes, as an AdmissionReview's body, to
// each of the operator's webhooks: controller-runtime's handler as Setup
// registers it (admission.WithDefaulter, admission.WithValidator) around
// our defaulter and validators, with its panic recovery off so that a panic
// fails. Only the API server should reach the webhooks, but what it sends
// holds objects users wrote. Its promises:
//   - an answer is always an AdmissionReview with a response; a request
//     that decodes gets its uid back;
//   - nothing is an internal error (500);
//   - a runtime refused names the field: `spec.template.spec.replicatedJobs[i]…`
//     (several errors: `[spec.template.spec.replicatedJobs[i]…, …]`);
//   - the defaulter's patch only sets runtimePatches' times, and sets the
//     time of every runtimePatch the request left without one.
//
// `make fuzz` runs it; its seeds (testdata/fuzz/FuzzAdmissionReview and
// below) run in every `go test`.
func FuzzAdmissionReview(f *testing.F) {
	for _, seed := range admissionSeeds {
		f.Add(seed.webhook, []byte(seed.review))
	}
	handlers := admissionHandlers(f)
	f.Fuzz(func(t *testing.T, webhook uint8, body []byte) {
		to := webhook % webhooks
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		handlers[to].ServeHTTP(rec, req)

		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response == nil {
			t.Fatalf("the answer is not an AdmissionReview with a response (%v): %s", err, rec.Body)
		}
		resp := review.Response
		if resp.Result != nil && resp.Result.Code == http.StatusInternalServerError {
			t.Fatalf("internal error: %s\nrequest: %q", resp.Result.Message, body)
		}
		// What the handler decoded: the API machinery's keys are
		// case-sensitive, encoding/json's are not.
		var sent admissionv1.AdmissionReview
		if err := utiljson.Unmarshal(body, &sent); err != nil || sent.Request == nil {
			return
		}
		if resp.UID != sent.Request.UID && (resp.Result == nil || resp.Result.Code != http.StatusBadRequest) {
			t.Errorf("the answer's uid %q, want the request's %q", resp.UID, sent.Request.UID)
		}
		switch to {
		case toTrainingRuntimeValidator, toClusterTrainingRuntimeValidator:
			// Several errors come as Kubernetes prints an aggregate:
			// "[first, second]"; the first names its field as a lone one does.
			if !resp.Allowed && resp.Result.Code == http.StatusForbidden && !strings.HasPrefix(strings.TrimPrefix(resp.Result.Message, "["), "spec.template.spec.replicatedJobs[") {
				t.Errorf("a runtime refused without naming the field: %s", resp.Result.Message)
			}
		case toDefaulter:
			if resp.Allowed {
				checkDefaulterPatch(t, sent.Request, resp)
			}
		}
	})
}

// timePatch is the path of the one field the defaulter sets.
var timePatch = regexp.MustCompile(`^/spec/runtimePatches/(\d+)/time$`)

// checkDefaulterPatch checks that the defaulter's answer to req sets the
// time of every runtimePatch without one, and nothing but times.
func checkDefaulterPatch(t *testing.T, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if len(resp.Patch) > 0 {
		if err := json.Unmarshal(resp.Patch, &ops); err != nil {
			t.Fatalf("the patch is not a JSON patch: %v\n%s", err, resp.Patch)
		}
	}
	stamped := map[string]bool{}
	for _, op := range ops {
		var tm metav1.Time
		if !timePatch.MatchString(op.Path) || op.Op == "remove" || json.Unmarshal(op.Value, &tm) != nil || tm.IsZero() {
			t.Errorf("the defaulter patches %s %s %s; it may only set runtimePatches' times\nrequest object: %s", op.Op, op.Path, op.Value, req.Object.Raw)
		}
		stamped[op.Path] = true
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		if len(ops) > 0 {
			t.Errorf("the defaulter patches a %s: %s", req.Operation, resp.Patch)
		}
		return
	}
	var obj struct {
		Spec struct {
			RuntimePatches []any `json:"runtimePatches"`
		} `json:"spec"`
	}
	if utiljson.Unmarshal(req.Object.Raw, &obj) != nil {
		return
	}
	for k, p := range obj.Spec.RuntimePatches {
		if m, ok := p.(map[string]any); ok && m["time"] == nil && !stamped["/spec/runtimePatches/"+strconv.Itoa(k)+"/time"] {
			t.Errorf("runtimePatches[%d] %v left without a time; patch %s", k, m, resp.Patch)
		}
	}
}

// admissionHandlers are the operator's webhooks as Setup registers them,
// with panics not recovered: the TrainJob validator reads the runtimes
// torch-distributed (ClusterTrainingRuntime) and team/torch (TrainingRuntime).
func admissionHandlers(tb testing.TB) [webhooks]*admission.Webhook {
	s := scheme.New()
	cluster := pipelinetest.TrainerRuntime{Name: "torch-distributed", MLPolicy: "{numNodes: 1, torch: {}}",
		Pod: "{containers: [{name: node, image: app:v1}]}"}.Runtime(tb).Object
	namespaced := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "torch"},
		Spec: *cluster.(*trainer.ClusterTrainingRuntime).Spec.DeepCopy()}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(cluster, namespaced).Build()
	fw, err := plugins.NewFramework(context.Background(), plugins.Config{}, pipeline.OfflineHandle(pipeline.OperatorInfo{}))
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	return [webhooks]*admission.Webhook{
		toDefaulter: trainJobDefaulterWebhook(&TrainJobDefaulter{now: func() time.Time { return now }}).WithRecoverPanic(false),
		toTrainJobValidator: admission.WithValidator(s, admission.Validator[*trainer.TrainJob](&TrainJobValidator{client: c, live: c, framework: fw,
			decoder: serializer.NewCodecFactory(s).UniversalDeserializer()})).WithRecoverPanic(false),
		toTrainingRuntimeValidator:        admission.WithValidator(s, admission.Validator[*trainer.TrainingRuntime](TrainingRuntimeValidator{})).WithRecoverPanic(false),
		toClusterTrainingRuntimeValidator: admission.WithValidator(s, admission.Validator[*trainer.ClusterTrainingRuntime](ClusterTrainingRuntimeValidator{})).WithRecoverPanic(false),
	}
}

// review is an AdmissionReview of operation op on object (and oldObject,
// when not ""), as the API server sends it.
func review(kind, op, object, oldObject string) string {
	req := `{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"trainer.kubeflow.org","version":"v1alpha1","kind":"` + kind + `"},` +
		`"resource":{"group":"trainer.kubeflow.org","version":"v1alpha1","resource":"` + strings.ToLower(kind) + `s"},` +
		`"namespace":"team","operation":"` + op + `","userInfo":{"username":"jane"},"object":` + object
	if oldObject != "" {
		req += `,"oldObject":` + oldObject
	}
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + req + `}}`
}

const (
	fuzzTrainJob = `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"alpha","namespace":"team"},` +
		`"spec":{"runtimeRef":{"name":"torch-distributed","apiGroup":"trainer.kubeflow.org","kind":"ClusterTrainingRuntime"},` +
		`"trainer":{"numNodes":2,"command":["torchrun","train.py"],"resourcesPerNode":{"requests":{"cpu":"1000m","nvidia.com/gpu":"8"}}},` +
		`"runtimePatches":[{"manager":"kueue.x-k8s.io/manager","trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"node","template":{"spec":{"template":{"spec":{"nodeSelector":{"pool":"gpu"}}}}}}]}}}},` +
		`{"manager":"example.com/tool","time":"2026-01-01T00:00:00Z"}]}}`
	fuzzTrainJobNoPatches = `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"beta","namespace":"team"},` +
		`"spec":{"runtimeRef":{"name":"torch","kind":"TrainingRuntime"},"suspend":true}}`
	fuzzRuntime = `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"%s","metadata":{"name":"torch"},"spec":{"mlPolicy":{"numNodes":1,"torch":{}},` +
		`"template":{"spec":{"replicatedJobs":[{"name":"dataset-initializer","replicas":1,"template":{"metadata":{"labels":{"trainer.kubeflow.org/trainjob-ancestor-step":"dataset-initializer"}},` +
		`"spec":{"template":{"spec":{"containers":[{"name":"dataset-initializer","image":"init"}]}}}}},` +
		`{"name":"node","replicas":1,"template":{"metadata":{"labels":{"trainer.kubeflow.org/trainjob-ancestor-step":"trainer"}},"spec":{"template":{"spec":{"containers":[{"name":"node","image":"app"}]}}}}}]}}}}`
)

var admissionSeeds = []struct {
	webhook uint8
	review  string
}{
	{toDefaulter, review("TrainJob", "CREATE", fuzzTrainJob, "")},
	{toDefaulter, review("TrainJob", "UPDATE", fuzzTrainJob, fuzzTrainJob)},
	{toDefaulter, review("TrainJob", "UPDATE", fuzzTrainJob, fuzzTrainJobNoPatches)},
	{toDefaulter, review("TrainJob", "CREATE", fuzzTrainJobNoPatches, "")},
	{toDefaulter, review("TrainJob", "DELETE", "null", fuzzTrainJob)},
	{toTrainJobValidator, review("TrainJob", "CREATE", fuzzTrainJob, "")},
	{toTrainJobValidator, review("TrainJob", "CREATE", fuzzTrainJobNoPatches, "")},
	{toTrainJobValidator, review("TrainJob", "UPDATE", fuzzTrainJobNoPatches, fuzzTrainJobNoPatches)},
	{toTrainJobValidator, review("TrainJob", "CREATE", strings.Replace(fuzzTrainJobNoPatches, `"beta"`, `"`+strings.Repeat("b", 60)+`"`, 1), "")},
	{toTrainingRuntimeValidator, review("TrainingRuntime", "CREATE", strings.Replace(fuzzRuntime, "%s", "TrainingRuntime", 1), "")},
	{toTrainingRuntimeValidator, review("TrainingRuntime", "CREATE", strings.Replace(strings.Replace(fuzzRuntime, "%s", "TrainingRuntime", 1), `"name":"node"`, `"name":"node-of-a-name-too-long"`, 1), "")},
	{toClusterTrainingRuntimeValidator, review("ClusterTrainingRuntime", "UPDATE", strings.Replace(fuzzRuntime, "%s", "ClusterTrainingRuntime", 1), strings.Replace(fuzzRuntime, "%s", "ClusterTrainingRuntime", 1))},
	{toClusterTrainingRuntimeValidator, review("ClusterTrainingRuntime", "CREATE", strings.Replace(strings.Replace(fuzzRuntime, "%s", "ClusterTrainingRuntime", 1), `"replicas":1`, `"replicas":3`, 1), "")},
	{toDefaulter, strings.Replace(review("TrainJob", "CREATE", fuzzTrainJob, ""), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1)},
	{toTrainJobValidator, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`},
	{toDefaulter, `{"request":{"object":{"spec":{"runtimePatches":[null,{}]}}}}`},
	{toDefaulter, `not json`},
}
