#!/usr/bin/env bash
# check-names.sh LIB.a...: fail when a global symbol of a Rover library lacks
# its prefix, or when two libraries define the same symbol (make check-names;
# make test runs it), so that any two libraries link together.
#   librover-common.a, -alg.a, -pg.a    rv_
#   librover-scaling.a                  rv_scaling_
#   librover-testlib.a                  rv_test_
#   librover-trainer.a                  rv_trainer_ (its interface) or
#                                       trainer_ (shared between its files)
#   librover-<daemon>.a                 the file's name (store_ in store.c),
#                                       the first word of it (api_ in
#                                       api_jobs.c) or the daemon's (brain_)
# Names the compiler makes (starting with "_" or ".") are not ours.
# KNOWN lists the violations not fixed yet: each is reported, not failed.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 LIB.a..." >&2; exit 2; }

# lib-name:glob of symbols still to rename, with why.
KNOWN=()

known() { # lib symbol
	local k
	for k in "${KNOWN[@]}"; do
		# shellcheck disable=SC2053 # the right side is a glob on purpose
		[[ "${k%%:*}" = "$1" && $2 == ${k#*:} ]] && return 0
	done
	return 1
}

bad=0 nsyms=0 nknown=0
declare -A owner=()
for lib in "$@"; do
	base=$(basename -- "$lib")
	[ -f "$lib" ] || { echo "check-names: no $lib" >&2; exit 2; }
	case $base in
	librover-common.a | librover-alg.a | librover-pg.a) kind=shared ;;
	librover-scaling.a) kind=scaling ;;
	librover-testlib.a) kind=test ;;
	librover-trainer.a) kind=trainer ;;
	librover-*.a) kind=daemon daemon=${base#librover-} daemon=${daemon%.a} ;;
	*) echo "check-names: $lib is not a Rover library" >&2; exit 2 ;;
	esac
	# "nm -A" lines: "LIB:MEMBER.o:ADDRESS TYPE NAME", read as "LIB:MEMBER TYPE NAME".
	while read -r where _ name; do
		[ -n "$name" ] || continue
		case $name in _* | .*) continue ;; esac
		member=${where##*:}
		member=${member%.o}
		nsyms=$((nsyms + 1))
		if [ -n "${owner[$name]:-}" ] && [ "${owner[$name]}" != "$base" ]; then
			echo "$base: $member.o: $name is also defined in ${owner[$name]}" >&2
			bad=$((bad + 1))
		fi
		owner[$name]=$base
		case $kind in
		shared) ok=rv_ want="rv_" ;;
		scaling) ok=rv_scaling_ want="rv_scaling_" ;;
		test) ok=rv_test_ want="rv_test_" ;;
		trainer)
			ok=trainer_ want="rv_trainer_ or trainer_"
			[[ $name == rv_trainer_* ]] && ok=rv_trainer_
			;;
		daemon)
			ok=
			for p in "${member}_" "${member%%_*}_" "${daemon}_"; do
				[[ $name == "$p"* ]] && ok=$p
			done
			want="${member}_, ${member%%_*}_ or ${daemon}_"
			;;
		esac
		if [ -n "$ok" ] && [[ $name == "$ok"* ]]; then
			continue
		fi
		if known "$base" "$name"; then
			nknown=$((nknown + 1))
			continue
		fi
		echo "$base: $member.o: global symbol $name does not begin with $want" >&2
		bad=$((bad + 1))
	done < <(nm -A -g --defined-only -- "$lib" 2>/dev/null |
		sed -E 's/^(.*\.o):[[:space:]]*/\1 /; s/^([^ ]+) [0-9a-fA-F]+ /\1 /')
done
if [ "$bad" -gt 0 ]; then
	echo "check-names: $bad symbol(s) without their prefix or defined twice; rename them (static if file-local)" >&2
	exit 1
fi
note=
[ "$nknown" -eq 0 ] || note=" ($nknown not yet renamed, listed in scripts/check-names.sh)"
echo "check-names: $# libraries, $nsyms global symbols, each with its prefix$note"
