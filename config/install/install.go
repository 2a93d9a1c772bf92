// Package install embeds what `kubectl trainjob install` applies besides the CRDs: install.yaml, the
// kustomize build of config/install (config/default without its CRDs), written by `make generate`. The
// CRDs come from config/crd, which the binary embeds already; together they are config/default.
package install

import _ "embed"

// Manifests is install.yaml: a YAML stream in kustomize's order (Namespace first, webhook configurations
// last).
//
//go:embed install.yaml
var Manifests []byte
