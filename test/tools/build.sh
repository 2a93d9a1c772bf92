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
CNI_PLUGINS_VERSION=v1.10.0
KUEUE_VERSION=v0.17.0

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

# build_cni VERSION: the CNI plugins the real node's containerd runs, in one folder (its CNI bin_dir),
# linked as <links>/cni.
build_cni() {
	local version=$1 dir="$cache/cni/$1" p
	for p in main/bridge ipam/host-local main/loopback; do
		local name=${p#*/}
		if [[ ! -x "$dir/$name" ]]; then
			local start=$SECONDS
			echo ">> building CNI plugin $name $version (cached in $dir)" >&2
			mkdir -p "$dir"
			(cd "$here/cni" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/$name.tmp" "github.com/containernetworking/plugins/plugins/$p")
			mv "$dir/$name.tmp" "$dir/$name"
			echo ">> built CNI plugin $name $version in $((SECONDS - start))s" >&2
		fi
	done
	ln -sfn "$dir" "$links/cni"
}

# kueue_manifests VERSION: Kueue's CRDs and webhook configurations, copied from its module next to its binary
# (linked as <links>/kueue-manifests), so the cluster installs exactly what that version serves.
kueue_manifests() {
	local dir="$cache/kueue/$1/manifests" src
	if [[ ! -f "$dir/webhooks.yaml" ]]; then
		src=$(cd "$here/kueue" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/crd"
		cp "$src"/config/components/crd/bases/*.yaml "$dir.tmp/crd/"
		cp "$src/config/components/webhook/manifests.yaml" "$dir.tmp/webhooks.yaml"
		chmod -R u+w "$dir.tmp" && rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	ln -sfn "$dir" "$links/kueue-manifests"
}

# node_packages: the real node runs Debian's containerd and runc, and kube-proxy drives iptables; make
# bench-scale reads a command's peak memory from GNU time. They are installed here, at build time, on Linux as
# root; elsewhere the real node is off and says why.
node_packages() {
	local missing=() p
	for p in containerd runc ctr iptables nsenter ip sysctl; do
		command -v "$p" >/dev/null || missing+=("$p")
	done
	# `command -v time` finds bash's keyword, not the program.
	[[ -x /usr/bin/time ]] || missing+=(time)
	[[ ${#missing[@]} -eq 0 ]] && return 0
	if [[ $(uname -s) != Linux || $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
		echo ">> the real node needs ${missing[*]} (not installed: this is not Linux as root with apt-get); the local cluster runs without it" >&2
		return 0
	fi
	echo ">> installing Debian's containerd, runc and iptables for the real node (missing: ${missing[*]})" >&2
	local start=$SECONDS
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc iptables iproute2 procps util-linux time >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc iptables iproute2 procps util-linux time >/dev/null; }
	echo ">> installed them in $((SECONDS - start))s" >&2
}

# browser_packages: the dashboard's browser tests drive Debian's Chromium, headless (chromedp). It is installed
# here as the real node's packages are, on Linux as root; elsewhere those tests are skipped and say why.
browser_packages() {
	command -v chromium >/dev/null && return 0
	if [[ $(uname -s) != Linux || $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
		echo ">> the dashboard's browser tests need chromium (not installed: this is not Linux as root with apt-get); they are skipped" >&2
		return 0
	fi
	echo ">> installing Debian's chromium for the dashboard's browser tests" >&2
	local start=$SECONDS
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	echo ">> installed it in $((SECONDS - start))s" >&2
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
sel kubelet && build kubelet "$KUBE_VERSION" kube k8s.io/kubernetes/cmd/kubelet "$(kube_ldflags)"
sel kube-proxy && build kube-proxy "$KUBE_VERSION" kube k8s.io/kubernetes/cmd/kube-proxy "$(kube_ldflags)"
sel cni && build_cni "$CNI_PLUGINS_VERSION"
# Our own program: keyed by its source, so an edit builds it again.
sel pause && build pause "src-$(cat "$repo/test/images/pause/main.go" | sha256sum | cut -c1-12)" ../.. ./test/images/pause
sel node-packages && node_packages
sel browser-packages && browser_packages
sel jobset && build jobset "$JOBSET_VERSION" controllers sigs.k8s.io/jobset
sel kwok && build kwok "$KWOK_VERSION" controllers sigs.k8s.io/kwok/cmd/kwok
# Kueue has its own module: it pins k8s.io v0.35 and Kubeflow Trainer's Go code (its TrainJob PodSets come from it).
sel kueue && build kueue "$KUEUE_VERSION" kueue sigs.k8s.io/kueue/cmd/kueue "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" &&
	kueue_manifests "$KUEUE_VERSION"
sel krew && build krew "$KREW_VERSION" krew sigs.k8s.io/krew/cmd/krew
sel validate-krew-manifest && build validate-krew-manifest "$KREW_VERSION" krew sigs.k8s.io/krew/cmd/validate-krew-manifest
exit 0
