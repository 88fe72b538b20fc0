# suite.sh: what the kubectl suites (check_standin.sh, check_manifests.sh)
# share; sourced after `top` is set and the shell is in it.  ok/notok print
# one check's line (notok sets failed=1); skip prints a counted skip, or
# fails under CI=true (which installs kubectl), both from
# tests/scripts/suite.sh; it also sets STANDIN (the
# built stand-in, its absence a failure) and kubectls (every kubectl found:
# `command -v kubectl`, then each path in KUBECTL_EXTRA), skipping without
# one.
# shellcheck shell=bash
B=${B:-build}
STANDIN="$top/$B/tests/k8s/k8s-standin"
# shellcheck source=tests/scripts/suite.sh
. "$top/tests/scripts/suite.sh"
[ -x "$STANDIN" ] || {
	echo "not ok - no $STANDIN: build first"
	exit 1
}
kubectls=()
command -v kubectl >/dev/null && kubectls+=("$(command -v kubectl)")
for k in ${KUBECTL_EXTRA:-}; do [ -x "$k" ] && kubectls+=("$k"); done
[ ${#kubectls[@]} -gt 0 ] || skip "kubectl: not installed (Debian: kubernetes-client)"
