#!/usr/bin/env bash
# Builds the local cluster's programs from Go modules into a cache folder keyed
# by version (outside the clone by default, so every clone on this machine
# reuses it) and links them into bin/tools of the clone. A program already in
# the cache is not built again.
#
#   TRAINJOB_TOOLS_CACHE  cache folder (default ${XDG_CACHE_HOME:-~/.cache}/kubectl-trainjob/tools)
#   TOOLS_BIN             folder of links (default <repo>/bin/tools)
#   $@                    names to build (default: all)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${TRAINJOB_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-trainjob/tools}
links=${TOOLS_BIN:-$repo/bin/tools}
mkdir -p "$cache" "$links"

ETCD_VERSION=v3.6.16
KUBE_VERSION=v1.36.3
JOBSET_VERSION=v0.12.0
KWOK_VERSION=v0.8.0
CONTROLLER_TOOLS_VERSION=v0.23.0
KUSTOMIZE_VERSION=v5.8.1
KREW_VERSION=v0.4.3

kube_ldflags() {
	local v=$KUBE_VERSION minor
	minor=$(echo "$v" | cut -d. -f2)
	echo "-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1" \
		"-X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
		"-X k8s.io/client-go/pkg/version.gitVersion=$v -X k8s.io/client-go/pkg/version.gitMajor=1" \
		"-X k8s.io/client-go/pkg/version.gitMinor=$minor"
}

# build NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]
build() {
	local name=$1 version=$2 dir=$3 pkg=$4 ldflags=${5:-"-s -w"}
	local out="$cache/$name/$version/$name"
	if [[ ! -x "$out" ]]; then
		local start=$SECONDS
		echo ">> building $name $version (cached in $cache/$name/$version)" >&2
		mkdir -p "$(dirname "$out")"
		(cd "$here/$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg")
		mv "$out.tmp" "$out"
		echo ">> built $name $version in $((SECONDS - start))s" >&2
	fi
	ln -sfn "$out" "$links/$name"
}

want() { [[ $# -eq 0 ]] && return 0; local n; for n in "${selected[@]}"; do [[ $n == "$1" ]] && return 0; done; return 1; }
selected=("$@")
sel() { [[ ${#selected[@]} -eq 0 ]] || want "$1"; }

sel controller-gen && build controller-gen "$CONTROLLER_TOOLS_VERSION" codegen sigs.k8s.io/controller-tools/cmd/controller-gen
sel kustomize && build kustomize "$KUSTOMIZE_VERSION" codegen sigs.k8s.io/kustomize/kustomize/v5
sel etcd && build etcd "$ETCD_VERSION" etcd .
sel kube-apiserver && build kube-apiserver "$KUBE_VERSION" kube k8s.io/kubernetes/cmd/kube-apiserver "$(kube_ldflags)"
sel kube-controller-manager && build kube-controller-manager "$KUBE_VERSION" kube k8s.io/kubernetes/cmd/kube-controller-manager "$(kube_ldflags)"
sel kube-scheduler && build kube-scheduler "$KUBE_VERSION" kube k8s.io/kubernetes/cmd/kube-scheduler "$(kube_ldflags)"
sel kubectl && build kubectl "$KUBE_VERSION" kube k8s.io/kubernetes/cmd/kubectl "$(kube_ldflags)"
sel jobset && build jobset "$JOBSET_VERSION" controllers sigs.k8s.io/jobset
sel kwok && build kwok "$KWOK_VERSION" controllers sigs.k8s.io/kwok/cmd/kwok
sel krew && build krew "$KREW_VERSION" krew sigs.k8s.io/krew/cmd/krew
sel validate-krew-manifest && build validate-krew-manifest "$KREW_VERSION" krew sigs.k8s.io/krew/cmd/validate-krew-manifest
exit 0
