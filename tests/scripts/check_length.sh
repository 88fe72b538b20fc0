#!/usr/bin/env bash
# Suite for scripts/check-length.sh: a tree whose functions are at most 100
# lines passes; one of 101 lines in master/ or algorithms/ fails with its
# file, line and name; a listed long function passes, and a listed one that
# is no longer long fails.  Prints one "ok"/"not ok" line per check
# (tests/run.sh counts them) and exits 1 if any failed.
set -u
. "$(dirname "$0")/suite.sh"
suite_init length

# fn NAME LINES: a function of that many lines, signature to brace.
fn() {
	printf 'static int %s(int x,\n\t\tint y)\n{\n' "$1"
	for ((i = 0; i < $2 - 5; i++)); do printf '\tx += y;\n'; done
	printf '\treturn x;\n}\n\n'
}

good_tree() {
	rm -rf "$tmp/t" && mkdir -p "$tmp/t/master" "$tmp/t/algorithms" "$tmp/t/agent" &&
		cd "$tmp/t" || exit 1
	{
		printf '#define T 1\nstatic const int table[] = {\n\t1,\n};\n'
		printf 'int decl(int a,\n\t int b);\n\n'
		fn short 20
		fn hundred 100
	} >master/a.c
	fn fine 100 >algorithms/b.c
	fn elsewhere 300 >agent/c.c # not checked
}

# run NAME WANT(pass|fail) [GREP]: the check on the tree, its verdict and
# the text its output must hold.
run() {
	local name=$1 want=$2 text=${3:-} out got=pass
	out=$("$check" . 2>&1) || got=fail
	if [ "$got" != "$want" ]; then
		echo "not ok - $name: ${got}ed: $out"
		failed=1
	elif [ -n "$text" ] && ! grep -qF -- "$text" <<<"$out"; then
		echo "not ok - $name: no \"$text\" in: $out"
		failed=1
	else
		echo "ok - $name"
	fi
}

export ROVER_FN_LONG=""
good_tree
run "functions of 100 lines pass" pass
good_tree
fn long_one 101 >>master/a.c
run "101 lines in master/ fail" fail "master/a.c:130: long_one is 101 lines"
good_tree
fn long_alg 101 >>algorithms/b.c
run "101 lines in algorithms/ fail" fail "algorithms/b.c:102: long_alg is 101 lines"
good_tree
fn long_one 150 >>master/a.c
ROVER_FN_LONG="master/a.c:long_one" run "a listed long function passes" pass
good_tree
ROVER_FN_LONG="master/a.c:hundred" run "a listed function no longer long fails" fail \
	"master/a.c:hundred is no longer over 100 lines"

unset ROVER_FN_LONG
if out=$("$check" "$top" 2>&1); then echo "ok - the source tree's functions are short"; else
	echo "not ok - the source tree: $out"; failed=1; fi
exit $failed
