// Package cluster runs a real Kubernetes control plane on loopback for tests, `make dev-cluster`, demos and
// benchmarks. It has two profiles:
//
//   - ProfileAPI: etcd and kube-apiserver (through controller-runtime's envtest), with the project's CRDs and
//     those it depends on (JobSet, scheduler-plugins and Volcano PodGroup) installed — what integration tests need;
//   - ProfileFull: adds kube-controller-manager, kube-scheduler, the JobSet controller with its webhooks, and KWOK
//     faking GPU and CPU nodes whose pods run, succeed, fail, restart and serve logs as test/cluster/README.md
//     describes; with Options.RealNode also a real kubelet node (containerd, runc, kube-proxy, CNI, a resolver
//     of Service names) in a network namespace of its own, whose pods are real containers.
//
// It runs the binaries that `make tools` builds (test/tools/build.sh) and never builds or downloads anything
// itself (the real node's pause image is written from the pause program `make tools` built). Every server listens on 127.0.0.1 on a free port; every process dies with the process that started it.
// The package is for tests and development only: production code must not import it.
package cluster
