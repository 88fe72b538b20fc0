#!/usr/bin/env bash
# Suite for scripts/check-readmes.sh: small trees made here with READMEs
# that match their code pass; a source file missing from its folder's file
# list, or a backticked name that is nowhere in the code, fails naming the
# README and the file or name.  Then this tree itself.  Prints one
# "ok"/"not ok" line per check and exits 1 if any failed.
set -u
. "$(dirname "$0")/suite.sh"
suite_init readmes

# tree NAME: a folder d/ with two files and a README listing both.
tree() {
	rm -rf "${tmp:?}/$1"
	mkdir -p "$tmp/$1/d"
	printf 'int rdzv_join(void) { return 0; }\n' >"$tmp/$1/d/rdzv.c"
	printf 'int rdzv_join(void);\n' >"$tmp/$1/d/rdzv.h"
	printf 'x = 1\n' >"$tmp/$1/d/tool.py"
	printf '# d\n\n`rdzv_join()` joins; `heartbeat_ms` is a key.\n\n## Files in reading order\n\n- `rdzv.{h,c}`: the rendezvous\n- `tool.py`: a tool\n\n## Other\n' >"$tmp/$1/d/README.md"
	printf 'heartbeat_ms = 5\n' >"$tmp/$1/d/conf"
}
run() { out=$("$check" "$tmp/$1" 2>&1); }

tree ok
pass "a README naming its files and existing names passes" ok

tree unlisted
printf 'int nodelink_attach(void) { return 0; }\n' >"$tmp/unlisted/d/nodelink.c"
fail "a source file out of its folder's file list" \
	"d/README.md: does not name d/nodelink.c" unlisted

tree elsewhere
printf 'int nodelink_attach(void) { return 0; }\n' >"$tmp/elsewhere/d/nodelink.c"
sed -i 's/^# d$/# d: nodelink.c tells the planner/' "$tmp/elsewhere/d/README.md"
fail "a file named above the file list is still out of it" \
	"d/README.md: does not name d/nodelink.c" elsewhere

tree gone
printf '\nThen `decision_to_plan` builds the plan.\n' >>"$tmp/gone/d/README.md"
fail "a backticked name that is gone" \
	"d/README.md:12: names \`decision_to_plan\`, which is nowhere in the code" gone

tree gonecall
printf '\n`store_gone()` does it.\n' >>"$tmp/gonecall/d/README.md"
fail "a name with () that is gone" "names \`store_gone()\`" gonecall

tree words
printf '\n`struct rdzv_none`, `d/none_here.c`, `ROVER_NO_SUCH` and `word` are not names.\n' \
	>>"$tmp/words/d/README.md"
pass "a span holding more than one lowercase word is not a name" words

tree outside
printf '\nGSL fits with `gsl_multifit_nlinear`.\n' >>"$tmp/outside/d/README.md"
pass "a name of another project on the OUTSIDE list" outside

if out=$("$check" 2>&1); then
	echo "ok - this tree's READMEs match its code"
else
	echo "not ok - this tree's READMEs match its code: $out"
	failed=1
fi
exit $failed
