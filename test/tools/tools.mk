# The local cluster: `make tools` builds its programs, `make dev-cluster` runs it. Included by the root Makefile.

# TOOLS_BIN holds links to the built programs (the builds themselves are cached outside the clone, see
# test/tools/build.sh); test/cluster finds them there, or wherever TRAINJOB_TOOLS_BIN points.
TOOLS_BIN ?= $(CURDIR)/bin/tools
# DEV_CLUSTER_DIR receives the dev cluster's kubeconfig and its components' logs (logs/<component>.log).
DEV_CLUSTER_DIR ?= $(CURDIR)/bin/dev-cluster
# DEV_CLUSTER_FLAGS passes options to it, e.g. DEV_CLUSTER_FLAGS="-gpu-nodes=8 -pod-run-duration=1m".
DEV_CLUSTER_FLAGS ?=
# KUEUE=1 adds Kueue to the dev cluster: its webhooks, the TrainJob and JobSet integrations, a ResourceFlavor for the
# GPU nodes and a ClusterQueue with 16 nvidia.com/gpu (docs/kueue.md).
KUEUE ?=
# OPERATOR=1 runs the product on it too: config/default's manifests and the operator's Deployment as a process of
# bin/kubectl-trainjob (built first), or of $KUBECTL_TRAINJOB_BIN where that is set, as `make demo` does.
OPERATOR ?=

##@ Local cluster
.PHONY: tools dev-cluster

tools: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, kube-proxy, CNI plugins, JobSet, KWOK, Kueue, controller-gen, kustomize, krew (cached by version); install containerd, runc, iptables, chromium (Linux, root).
	TOOLS_BIN=$(TOOLS_BIN) $(CURDIR)/test/tools/build.sh

dev-cluster: tools $(if $(OPERATOR),$(if $(KUBECTL_TRAINJOB_BIN),,build)) ## Run the full local cluster in the foreground (Ctrl-C stops it); prints the export KUBECONFIG line.
	go build -o $(DEV_CLUSTER_DIR)/dev-cluster ./test/cluster/cmd/dev-cluster
	TRAINJOB_TOOLS_BIN=$(TOOLS_BIN) $(DEV_CLUSTER_DIR)/dev-cluster -dir=$(DEV_CLUSTER_DIR) $(if $(KUEUE),-kueue) \
		$(if $(OPERATOR),-operator=$(or $(KUBECTL_TRAINJOB_BIN),$(CURDIR)/bin/kubectl-trainjob)) $(DEV_CLUSTER_FLAGS)
