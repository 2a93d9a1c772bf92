package dryrun

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-trainjob/kubectl-trainjob/config/crd"
)

// Schema checks objects of the project's kinds as the API server does at
// create: unknown fields, CRD defaults, OpenAPI rules and CEL rules, from
// the very CRDs the operator installs.
type Schema struct {
	kinds map[schema.GroupVersionKind]*kindSchema
}

type kindSchema struct {
	gk         schema.GroupKind
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// NewSchema loads the embedded CRDs.
func NewSchema() (*Schema, error) {
	s := &Schema{kinds: map[schema.GroupVersionKind]*kindSchema{}}
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	for _, name := range files {
		data, err := fs.ReadFile(crd.Bases, name)
		if err != nil {
			return nil, err
		}
		v1 := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, v1); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, ver := range v1.Spec.Versions {
			ks, err := newKindSchema(v1, ver)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", name, ver.Name, err)
			}
			s.kinds[schema.GroupVersionKind{Group: v1.Spec.Group, Version: ver.Name, Kind: v1.Spec.Names.Kind}] = ks
		}
	}
	return s, nil
}

func newKindSchema(crd *apiextensionsv1.CustomResourceDefinition, ver apiextensionsv1.CustomResourceDefinitionVersion) (*kindSchema, error) {
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(ver.Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, err
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, err
	}
	return &kindSchema{
		gk:         schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind},
		structural: structural,
		validator:  validator,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// Knows tells whether gvk is one of the project's kinds.
func (s *Schema) Knows(gvk schema.GroupVersionKind) bool { return s.kinds[gvk] != nil }

// Admit defaults obj in place and validates it as a create. The error is
// the API server's own: `<Kind>.<group> "<name>" is invalid: <path>: …`.
func (s *Schema) Admit(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	ks := s.kinds[gvk]
	if ks == nil {
		return fmt.Errorf("unknown kind %s", gvk)
	}
	var unknown []string
	for _, path := range structuralpruning.PruneWithOptions(obj.Object, ks.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		if !strings.HasPrefix(path, "metadata.") {
			unknown = append(unknown, path)
		}
	}
	if len(unknown) > 0 {
		return unknownFieldsError(ks.gk, obj.GetName(), unknown)
	}
	var errs field.ErrorList
	structuraldefaulting.Default(obj.Object, ks.structural)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj.Object, ks.validator)...)
	celErrs, _ := ks.cel.Validate(ctx, nil, ks.structural, obj.Object, nil, celconfig.RuntimeCELCostBudget)
	errs = append(errs, celErrs...)
	if len(errs) > 0 {
		return apierrors.NewInvalid(ks.gk, obj.GetName(), errs)
	}
	return nil
}

// unknownFieldsError words unknown fields as kubectl's strict decoding does.
func unknownFieldsError(gk schema.GroupKind, name string, paths []string) error {
	var b strings.Builder
	for i, p := range paths {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "unknown field %q", p)
	}
	return fmt.Errorf("%s %q is invalid: %s", gk.Kind, name, b.String())
}
