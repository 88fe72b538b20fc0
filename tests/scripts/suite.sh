# tests/scripts/suite.sh: what the shell suites share, sourced.  ok and
# notok print one check's "ok"/"not ok" line (tests/run.sh counts them;
# notok sets failed, 0 at first); skip prints a counted skip and ends the
# suite, or fails it under CI=true (which installs what a suite skips
# for).  For the suites of the tree checks (check_layers.sh,
# check_length.sh, check_names.sh, check_readmes.sh): suite_init sets top
# (the tree), check (the script under test), tmp (a temp folder removed at
# exit) and failed; pass and fail print a check's line from a `run` the
# suite defines, which runs the check and leaves its output in $out.
# shellcheck shell=bash disable=SC2034,SC2154 # set here, used by the suite
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

# suite_init NAME: the suite of scripts/check-NAME.sh.
suite_init() {
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	check=$top/scripts/check-$1.sh
	tmp=$(mktemp -d "/tmp/rover-$1-XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	failed=0
}

# pass NAME ARGS...: run ARGS, want a pass.
pass() { if run "${@:2}"; then echo "ok - $1"; else echo "not ok - $1: $out"; failed=1; fi; }

# fail NAME WANT ARGS...: run ARGS, want a failure whose output holds WANT.
fail() {
	local name=$1 want=$2
	shift 2
	if run "$@"; then
		echo "not ok - $name: passed"
		failed=1
	elif ! grep -qF -- "$want" <<<"$out"; then
		echo "not ok - $name: no \"$want\" in: $out"
		failed=1
	else
		echo "ok - $name"
	fi
}
