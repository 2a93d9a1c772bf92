# kubectl-trainjob — one binary: a kubectl plugin and the operator it talks to.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/kubectl-trainjob/kubectl-trainjob/pkg/version.Version=$(VERSION) \
	-X github.com/kubectl-trainjob/kubectl-trainjob/pkg/version.GitCommit=$(GIT_COMMIT)
TOOLS_BIN ?= $(CURDIR)/bin/tools
export TRAINJOB_TOOLS_BIN := $(TOOLS_BIN)
GO_TEST_FLAGS ?=

.PHONY: all
all: build

##@ Build
.PHONY: build
build: ## Build bin/kubectl-trainjob.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/kubectl-trainjob ./cmd/kubectl-trainjob

$(TOOLS_BIN)/controller-gen $(TOOLS_BIN)/kustomize:
	bash test/tools/build.sh $(notdir $@)

##@ Generate and verify
.PHONY: generate
generate: $(TOOLS_BIN)/controller-gen ## Regenerate deepcopy, CRDs and RBAC.
	$(TOOLS_BIN)/controller-gen object paths=./pkg/apis/...
	$(TOOLS_BIN)/controller-gen crd:generateEmbeddedObjectMeta=true paths=./pkg/apis/... output:crd:artifacts:config=config/crd/bases
	$(TOOLS_BIN)/controller-gen rbac:roleName=kubectl-trainjob-operator paths=./pkg/operator/... output:rbac:artifacts:config=config/rbac

.PHONY: verify
verify: ## Fail when generated files are stale, code is not gofmt'ed or go vet complains.
	@$(MAKE) --no-print-directory generate
	@if [ -n "$$(git status --porcelain -- pkg/apis config/crd config/rbac)" ]; then \
		echo "generated files are stale; run 'make generate' and commit:"; git status --porcelain -- pkg/apis config/crd config/rbac; exit 1; fi
	@out=$$(gofmt -l cmd pkg plugin test); if [ -n "$$out" ]; then echo "not gofmt'ed:"; echo "$$out"; exit 1; fi
	go vet ./...

##@ Test
.PHONY: test
test: verify test-unit test-integration ## Run every test (builds the local cluster's tools when missing).

.PHONY: test-unit
test-unit: ## Unit tests, golden files and fuzz seed corpora (no cluster).
	go test $(GO_TEST_FLAGS) ./pkg/... ./plugin/... ./cmd/... ./config/...

.PHONY: test-integration
test-integration: tools ## Tests against a real API server and the local GPU cluster.
	go test $(GO_TEST_FLAGS) -timeout 40m ./test/...

.PHONY: fuzz
fuzz: ## Fuzz the Build phase for FUZZTIME (default 2m).
	go test ./pkg/pipeline/... -run '^$$' -fuzz FuzzBuild -fuzztime $${FUZZTIME:-2m}

.PHONY: bench
bench: ## Benchmarks.
	go test ./pkg/... -run '^$$' -bench . -benchmem

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

-include test/tools/tools.mk
