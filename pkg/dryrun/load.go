// Package dryrun is the client-side dry run of a TrainJob: the operator's
// pipeline without a cluster. It reads TrainJobs and runtimes from files,
// admits them as the API server and the webhook would (CRD schema, CEL,
// defaults, CustomValidation plugins) and runs the Build phase. `render` and
// `describe-pipeline -f` use it.
package dryrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/admission"
	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/pipeline"
)

// Source names where an object was read: a file and its document number.
type Source struct {
	File     string
	Document int
}

func (s Source) String() string {
	if s.Document <= 1 {
		return s.File
	}
	return fmt.Sprintf("%s (document %d)", s.File, s.Document)
}

// Inputs are the TrainJobs and runtimes read from files, and the other
// objects there.
type Inputs struct {
	TrainJobs []*trainer.TrainJob
	Runtimes  []*pipeline.Runtime
	// Objects are the documents of other kinds: offline, the plugins read
	// them as the cluster (NewFramework).
	Objects []client.Object
	// Sources maps each object read to where it came from.
	Sources map[client.Object]Source
}

// MaxDocumentBytes is the largest document read: the API server refuses a
// larger request body (3 MiB), so nothing larger could ever be built, and
// a pipeline copies a TrainJob's fields into every pod template.
const MaxDocumentBytes = 3 << 20

// Loader reads files into Inputs.
type Loader struct {
	Schema *Schema
	// Namespace is given to namespaced objects without one.
	Namespace string
	// Stdin is read for the file name "-".
	Stdin io.Reader
}

// Load reads every document of every file. Documents of other kinds are
// kept as they are, in Objects; a document of our kinds that the API server
// would refuse is an error naming the file.
func (l *Loader) Load(ctx context.Context, in *Inputs, files ...string) error {
	if in.Sources == nil {
		in.Sources = map[client.Object]Source{}
	}
	for _, name := range files {
		var data []byte
		var err error
		if name == "-" {
			if l.Stdin == nil {
				return errors.New("-f -: no standard input")
			}
			data, err = io.ReadAll(l.Stdin)
			name = "<stdin>"
		} else {
			data, err = os.ReadFile(name)
		}
		if err != nil {
			return err
		}
		if err := l.loadDocuments(ctx, in, name, data); err != nil {
			return err
		}
	}
	return nil
}

func (l *Loader) loadDocuments(ctx context.Context, in *Inputs, file string, data []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		src := Source{File: file, Document: doc}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", src, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		if len(raw) > MaxDocumentBytes {
			return fmt.Errorf("%s: the document is %.1f MiB, larger than the %d MiB the API server accepts in a request",
				src, float64(len(raw))/(1<<20), MaxDocumentBytes>>20)
		}
		// Unstructured's own decoding keeps integers int64, as the API server does.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		gvk := u.GroupVersionKind()
		if gvk.Kind == "" {
			return fmt.Errorf("%s: object has no kind: every document needs apiVersion and kind", src)
		}
		if gvk.Group != trainer.GroupVersion.Group {
			in.Objects = append(in.Objects, u)
			continue
		}
		if !l.Schema.Knows(gvk) {
			return fmt.Errorf("%s: unknown kind %s: want TrainJob, TrainingRuntime or ClusterTrainingRuntime of %s", src, gvk.Kind, trainer.GroupVersion)
		}
		if gvk.Kind != trainer.ClusterTrainingRuntimeKind && u.GetNamespace() == "" {
			u.SetNamespace(l.Namespace)
		}
		if err := l.Schema.Admit(ctx, u); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		obj, err := typed(u)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		in.Sources[obj] = src
		switch o := obj.(type) {
		case *trainer.TrainJob:
			in.TrainJobs = append(in.TrainJobs, o)
		default:
			rt, err := pipeline.RuntimeOf(obj)
			if err != nil {
				return fmt.Errorf("%s: %w", src, err)
			}
			// What the operator's runtime webhook refuses, beyond the CRD's rules.
			if errs := admission.ValidateRuntimeSpec(rt.Spec); len(errs) > 0 {
				return fmt.Errorf("%s: %w", src, apierrors.NewInvalid(gvk.GroupKind(), obj.GetName(), errs))
			}
			in.Runtimes = append(in.Runtimes, rt)
		}
	}
}

// LoadOneTrainJob reads trainJobFiles and more as Load does, and wants exactly one TrainJob among them: the
// input of describe-pipeline -f and fit -f.
func LoadOneTrainJob(ctx context.Context, namespace string, stdin io.Reader, trainJobFiles []string, more ...string) (*Inputs, error) {
	schema, err := NewSchema()
	if err != nil {
		return nil, err
	}
	in := &Inputs{}
	loader := &Loader{Schema: schema, Namespace: namespace, Stdin: stdin}
	if err := loader.Load(ctx, in, append(append([]string{}, trainJobFiles...), more...)...); err != nil {
		return nil, err
	}
	if len(in.TrainJobs) != 1 {
		return nil, fmt.Errorf("want exactly one TrainJob in %s, found %d", strings.Join(trainJobFiles, ", "), len(in.TrainJobs))
	}
	return in, nil
}

// AdmitTrainJob admits a TrainJob made in memory (create's flags) as Load admits one read from a file: the
// CRD's defaults, schema and CEL rules. It returns the admitted copy and leaves tj as it is.
func (l *Loader) AdmitTrainJob(ctx context.Context, tj *trainer.TrainJob) (*trainer.TrainJob, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		return nil, err
	}
	// What a client sends: no status, no creation time.
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	if u.GetNamespace() == "" {
		u.SetNamespace(l.Namespace)
	}
	if err := l.Schema.Admit(ctx, u); err != nil {
		return nil, err
	}
	obj, err := typed(u)
	if err != nil {
		return nil, err
	}
	return obj.(*trainer.TrainJob), nil
}

func typed(u *unstructured.Unstructured) (client.Object, error) {
	var obj client.Object
	switch u.GetKind() {
	case trainer.TrainJobKind:
		obj = &trainer.TrainJob{}
	case trainer.TrainingRuntimeKind:
		obj = &trainer.TrainingRuntime{}
	case trainer.ClusterTrainingRuntimeKind:
		obj = &trainer.ClusterTrainingRuntime{}
	default:
		return nil, fmt.Errorf("unsupported kind %s", u.GetKind())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		return nil, err
	}
	return obj, nil
}
