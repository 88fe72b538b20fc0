#!/usr/bin/env bash
# Suite for examples/: every job spec there is valid JSON and every file its
# workers' commands name (an argument with a "/") exists in the tree, so the
# examples a newcomer copies point at something real.  A folder given to an
# option named *-dir is output the job makes: not checked.  Prints one "ok"/
# "not ok" line per check and exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.." || exit 1
failed=0
for spec in examples/*.json; do
	if ! args=$(jq -r '.spec.replicaSpecs[].command[]?' "$spec" 2>&1); then
		echo "not ok - $spec: $args"
		failed=1
		continue
	fi
	prev=
	for a in $args; do
		p=$prev
		prev=$a
		case $p in --*-dir | --*_dir) continue ;; esac
		case $a in
		/* | -*) continue ;; # an interpreter or an option
		*/*)
			if [ -e "$a" ]; then echo "ok - $spec names $a, which exists"; else
				echo "not ok - $spec names $a, which does not exist"; failed=1; fi
			;;
		esac
	done
done
exit $failed
