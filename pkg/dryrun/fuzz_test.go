package dryrun

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FuzzLoad feeds the file loader of `render`, `describe-pipeline -f` and
// `fit -f` any bytes as the content of a file: multi-document YAML, JSON,
// any kinds. Its promises:
//   - no panic; an error names the file (and the document, after the
//     first);
//   - every TrainJob and runtime it admits comes back the same when
//     encoded as JSON and loaded again (admission, defaults included, is a
//     fixed point);
//   - it keeps no more objects than the file has documents: a YAML
//     document takes a line at least, a JSON one a '{' (JSON documents
//     may share a line: `{"kind":"A"}{"kind":"B"}`).
//
// `make fuzz` runs it; its seeds run in every `go test`.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    command: [torchrun, train.py]
    resourcesPerNode: {requests: {cpu: 1000m, nvidia.com/gpu: 8}}
    env: [{name: LR, value: "0.1"}]
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
            spec: {template: {spec: {containers: [{name: node, image: pytorch/pytorch}]}}}
`,
		`{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainingRuntime","metadata":{"name":"mpi","namespace":"team"},` +
			`"spec":{"mlPolicy":{"numNodes":2,"mpi":{"numProcPerNode":1}},"template":{"spec":{"replicatedJobs":[{"name":"launcher","template":{"spec":{"template":{"spec":{"containers":[{"name":"node","image":"mpi"}]}}}}}]}}}}
{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"mpi"},"spec":{"runtimeRef":{"name":"mpi","kind":"TrainingRuntime"},"suspend":true}}`,
		"---\n---\nnull\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: webhook-cert}\ndata: {ca.crt: Zm9v}\n",
		"apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: bad}\nspec: {runtimeRef: {name: x}, trainer: {numNodes: -1}}\n",
		"apiVersion: trainer.kubeflow.org/v1alpha1\nkind: Runtime\nmetadata: {name: x}\n",
		"apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {runtimeRef: {name: x}, unknown: 1}\n",
		"metadata: {name: nokind}\n",
		"kind: [\n",
		"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	schema, err := NewSchema()
	if err != nil {
		f.Fatal(err)
	}
	l := &Loader{Schema: schema, Namespace: "team"}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &Inputs{Sources: map[client.Object]Source{}}
		if err := l.loadDocuments(ctx, in, "jobs.yaml", data); err != nil {
			if !strings.HasPrefix(err.Error(), "jobs.yaml") {
				t.Errorf("the error does not name the file: %v", err)
			}
			return
		}
		loaded := len(in.TrainJobs) + len(in.Runtimes) + len(in.Objects)
		lines, braces := strings.Count(string(data), "\n")+1, strings.Count(string(data), "{")
		if loaded > lines+braces {
			t.Errorf("%d objects loaded from %d lines and %d '{'", loaded, lines, braces)
		}
		admitted := make([]client.Object, 0, len(in.TrainJobs)+len(in.Runtimes))
		for _, tj := range in.TrainJobs {
			admitted = append(admitted, tj)
		}
		for _, rt := range in.Runtimes {
			admitted = append(admitted, rt.Object)
		}
		for _, obj := range admitted {
			encoded, err := json.Marshal(obj)
			if err != nil {
				t.Fatalf("encode %s: %v", in.Sources[obj], err)
			}
			again := &Inputs{Sources: map[client.Object]Source{}}
			if err := l.loadDocuments(ctx, again, "again.json", encoded); err != nil {
				t.Fatalf("%s loaded, but not once encoded: %v\n%s", in.Sources[obj], err, encoded)
			}
			var got client.Object
			switch {
			case len(again.TrainJobs) == 1:
				got = again.TrainJobs[0]
			case len(again.Runtimes) == 1:
				got = again.Runtimes[0].Object
			default:
				t.Fatalf("%s encoded loads as %d TrainJobs and %d runtimes", in.Sources[obj], len(again.TrainJobs), len(again.Runtimes))
			}
			if diff := cmp.Diff(obj, got); diff != "" {
				t.Errorf("%s encoded and loaded again differs (-first +again):\n%s", in.Sources[obj], diff)
			}
		}
	})
}
