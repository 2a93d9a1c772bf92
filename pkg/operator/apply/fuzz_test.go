package apply

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/scheme"
)

// FuzzTakeOverCreate feeds takeOverCreate any object to apply and any
// managed fields of the operator's create: the fields come from the live
// object, whose metadata.managedFields anyone who may update it can write.
// Errors are fine; a panic is not. Its promises:
//   - an object never leaves out its own fields: omitsAny of the fields
//     encoded from the object itself is false (encode, decode, walk: a
//     round trip through FieldsV1);
//   - the take-over is a JSON patch of metadata.managedFields (and the
//     resourceVersion it tests) alone, made only when the apply leaves a
//     field of the create out, and after it no field of the operator is
//     left to an Update.
//
// `make fuzz` runs it; its seeds run in every `go test`.
func FuzzTakeOverCreate(f *testing.F) {
	for _, seed := range []struct{ applied, fields string }{
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"alpha-mpi-hostfile","namespace":"ns","labels":{"a":"1"}},"data":{"hostfile":"alpha-node-0-0 slots=1\n"}}`,
			`{"f:data":{".":{},"f:hostfile":{}},"f:metadata":{"f:labels":{".":{},"f:a":{}}}}`},
		{`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"alpha","namespace":"ns"},"spec":{"suspend":true,"replicatedJobs":[{"name":"node","replicas":1,"template":{"spec":{"parallelism":2}}}]}}`,
			`{"f:spec":{"f:suspend":{},"f:replicatedJobs":{"k:{\"name\":\"node\"}":{".":{},"f:replicas":{},"f:template":{"f:spec":{"f:parallelism":{}}}}}}}`},
		{`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"alpha","namespace":"ns"},"spec":{"replicatedJobs":[{"name":"node","replicas":1}]}}`,
			`{"f:spec":{"f:suspend":{},"f:replicatedJobs":{"k:{\"name\":\"node\"}":{".":{},"f:replicas":{}}}}}`},
		{`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"alpha-mpi-ssh","namespace":"ns","finalizers":["x"]},"spec":{"args":["--a",1,true]}}`,
			`{"f:metadata":{"f:finalizers":{"v:\"x\"":{}}},"f:spec":{"f:args":{"i:0":{},"i:2":{}}}}`},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`, `{"x":`},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`, ``},
	} {
		f.Add([]byte(seed.applied), []byte(seed.fields))
	}
	// patch is the take-over's patch of the execution, nil when there was none.
	var patch []byte
	a := &Applier{client: fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(_ context.Context, _ client.WithWatch, _ client.Object, p client.Patch, _ ...client.PatchOption) (err error) {
			patch, err = p.Data(nil)
			return err
		},
	}).Build()}
	f.Fuzz(func(t *testing.T, applied, fields []byte) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(applied); err != nil {
			return
		}
		own, err := fieldpath.SetFromValue(value.NewValueInterface(u.Object)).ToJSON()
		if err != nil {
			t.Fatalf("encode the fields of %s: %v", applied, err)
		}
		if omits, err := omitsAny(u, &metav1.FieldsV1{Raw: own}); err != nil || omits {
			t.Errorf("omitsAny(the object's own fields %s) = %v, %v; want false\nobject: %s", own, omits, err, applied)
		}

		// The live object as typed metadata: its managed fields are kept as
		// they are, valid JSON or not, as a decoded object holds them.
		live := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
			ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), ResourceVersion: "7", ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:note":{}}}}`)}},
				{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields}},
			}}}
		patch = nil
		if err := a.takeOverCreate(context.Background(), u, live); err != nil || patch == nil {
			return
		}
		if omits, err := omitsAny(u, &metav1.FieldsV1{Raw: fields}); err != nil || !omits {
			t.Errorf("took over fields %s that %s does not leave out", fields, applied)
		}
		checkTakeOver(t, live, patch)
	})
}

// checkTakeOver checks the JSON patch that took over the create's fields of
// live: it changes metadata.managedFields only, and leaves none of the
// operator's fields to an Update.
func checkTakeOver(t *testing.T, live client.Object, patch []byte) {
	var ops []struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatalf("the take-over is not a JSON patch: %v\n%s", err, patch)
	}
	for _, op := range ops {
		if op.Path != "/metadata/managedFields" && op.Path != "/metadata/resourceVersion" {
			t.Errorf("the take-over changes %s: %s", op.Path, patch)
		}
		if op.Path != "/metadata/managedFields" {
			continue
		}
		var entries []metav1.ManagedFieldsEntry
		if err := json.Unmarshal(op.Value, &entries); err != nil {
			t.Fatalf("managedFields of the take-over: %v\n%s", err, op.Value)
		}
		for _, e := range entries {
			if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate {
				t.Errorf("after the take-over, %s still owns fields by an Update: %s\nlive managed fields: %v", FieldManager, op.Value, live.GetManagedFields())
			}
		}
	}
}
