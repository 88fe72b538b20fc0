#!/usr/bin/env bash
# Suite for tests/fuzz/: builds the libFuzzer harnesses (make fuzz-build,
# clang) and runs them for FUZZ_BUDGET seconds in all (default 30, split
# evenly), so `make test` stays within CI's time on 2 cores; `make fuzz`
# runs them longer.  First every seed is replayed (-runs=0): none may crash.  Prints one
# "ok"/"not ok" line per check and exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.." || exit 1
budget=${FUZZ_BUDGET:-30}
if ! command -v "${FUZZ_CC:-clang}" >/dev/null; then
	echo "not ok - clang not found (scripts/install-deps.sh installs it)"
	exit 1
fi
if ! out=$(make --no-print-directory fuzz-build 2>&1); then
	echo "not ok - make fuzz-build failed"
	printf '%s\n' "$out" | tail -20 | sed 's/^/    /'
	exit 1
fi
bins=(build/fuzz/fuzz_*)
failed=0
for bin in "${bins[@]}"; do
	name=$(basename "$bin")
	seeds="tests/fuzz/corpus/${name#fuzz_}"
	n=$(find "$seeds" -type f | wc -l)
	if [ "$n" -gt 0 ] && "$bin" -runs=0 "$seeds" >/dev/null 2>&1; then
		echo "ok - $name replays its $n seeds"
	else
		echo "not ok - $name: no seeds in $seeds, or a seed fails"
		failed=1
	fi
done
FUZZ_SECONDS=$((budget / ${#bins[@]})) tests/fuzz/run.sh "${bins[@]}" || failed=1
exit $failed
