# suite.sh: what the kubectl suites (check_standin.sh, check_manifests.sh)
# share; sourced after `top` is set and the shell is in it.  ok/notok print
# one check's line (notok sets failed=1); skip prints a counted skip, or
# fails under CI=true (which installs kubectl); it also sets STANDIN (the
# built stand-in, its absence a failure) and kubectls (every kubectl found:
# `command -v kubectl`, then each path in KUBECTL_EXTRA), skipping without
# one.
# shellcheck shell=bash
B=${B:-build}
STANDIN="$top/$B/tests/k8s/k8s-standin"
failed=0
ok() { echo "ok - $*"; }
notok() {
	echo "not ok - $*"
	failed=1
}
skip() {
	if [ "${CI:-}" = true ]; then
		echo "not ok - CI=true installs it, but: $*"
		exit 1
	fi
	echo "SKIP: $*"
	echo "ok - # SKIP $*"
	exit 0
}
[ -x "$STANDIN" ] || {
	echo "not ok - no $STANDIN: build first"
	exit 1
}
kubectls=()
command -v kubectl >/dev/null && kubectls+=("$(command -v kubectl)")
for k in ${KUBECTL_EXTRA:-}; do [ -x "$k" ] && kubectls+=("$k"); done
[ ${#kubectls[@]} -gt 0 ] || skip "kubectl: not installed (Debian: kubernetes-client)"
