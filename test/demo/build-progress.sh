#!/usr/bin/env bash
# build-progress.sh WHAT PACKAGE -- COMMAND…: runs COMMAND, which builds PACKAGE with go, for make demo with
# GOFLAGS=-v and, instead of go's list of every package it compiles (about 800 on a fresh clone), shows one
# progress line:
# packages compiled of those PACKAGE needs (the rest come from the build cache) and the time so far. On a
# terminal the line is redrawn in place; elsewhere it is printed every 15 s. Go's errors are printed as they are.
set -euo pipefail
what=$1 pkg=$2
shift 3
total=$(go list -deps "$pkg" | wc -l)
start=$SECONDS done=0 last=0
line() { printf '    %s: %d of %d packages compiled (the others cached), %ds' "$what" "$done" "$total" $((SECONDS - start)); }
status=1 # unless the command's status arrives
while IFS= read -r out; do
	if [[ $out =~ ^__go_build_status__\ ([0-9]+)$ ]]; then
		status=${BASH_REMATCH[1]}
		continue
	fi
	if [[ $out =~ ^[[:alnum:]_./~-]+$ ]]; then
		done=$((done + 1))
	else
		[ -t 1 ] && printf '\r\033[K'
		printf '%s\n' "$out"
	fi
	if [ -t 1 ]; then
		printf '\r\033[K%s' "$(line)"
	elif ((SECONDS - last >= 15)); then
		last=$SECONDS
		printf '%s\n' "$(line)"
	fi
done < <(set +e; GOFLAGS="-v ${GOFLAGS:-}" "$@" 2>&1; echo "__go_build_status__ $?")
[ -t 1 ] && printf '\r\033[K'
printf '%s\n' "$(line)"
exit "$status"
