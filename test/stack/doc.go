// Package stack brings the whole product up on a local cluster (test/cluster, full profile) the way its
// manifests say, for `make demo` and the end-to-end tests: everything `kustomize build config/default`
// produces (CRDs, the operator's namespace, RBAC, configuration, webhooks and the shipped
// ClusterTrainingRuntimes) is applied server-side, and the Deployment's container — the real
// kubectl-trainjob binary with the Deployment's arguments, environment, configuration and ServiceAccount —
// runs as a child process instead of a pod.
//
// What a pod would get from its own network and filesystem is supplied locally: the operator's servers
// listen on 127.0.0.1 on free ports, its volumes are folders, and the API server reaches its webhooks by
// URL (https://localhost:PORT/…) instead of through the Service, with the certificates the operator
// generates and injects itself. The cluster has no storage provisioner, so this package binds every
// PersistentVolumeClaim to a PersistentVolume of its own (volumes.go).
//
// It is for tests and demos only: production code must not import it.
package stack
