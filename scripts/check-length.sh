#!/usr/bin/env bash
# check-length.sh [ROOT]: fail when a function of master/ or algorithms/ is
# longer than ROVER_FN_MAX lines (default 100), from the first line of its
# signature to its closing brace (make check-length; make test runs it).
# A reader holds a function in mind whole; past that, split it into named
# steps.  A definition is what clang-format writes: the signature from
# column 0, "{" and "}" alone in column 0.
# LONG lists the functions known to be longer, each to be split; one that
# is no longer long must leave the list, so the list stays true.
# Prints "FILE:LINE: NAME is N lines, ..." for each and exits 1.
set -euo pipefail
cd "${1:-.}"
max=${ROVER_FN_MAX:-100}
dirs=(master algorithms)

LONG=(
)
# ROVER_FN_LONG="FILE:NAME ..." replaces the list (tests/scripts/check_length.sh).
if [ -n "${ROVER_FN_LONG+set}" ]; then
	read -ra LONG <<<"$ROVER_FN_LONG"
fi

# "FILE:LINE NAME LINES" for every function longer than max.
long_functions() {
	awk -v max="$max" '
	FNR == 1 { sig = 0; body = 0 }
	!body && /^$/ { sig = 0 }
	!body && /;[ \t]*$/ { sig = 0; next } # a declaration ended
	!body && /^[A-Za-z_]/ { if (!sig) { sig = FNR; text = "" } }
	!body && sig && text == "" && /\(/ { text = $0 }
	/^\{/ && sig && !body { body = 1; start = sig; name = text; next }
	/^\}/ {
		if (body && FNR - start + 1 > max) {
			sub(/\(.*/, "", name)
			k = split(name, w, /[ \t*]+/)
			printf "%s:%d %s %d\n", FILENAME, start, w[k], FNR - start + 1
		}
		body = 0; sig = 0
	}
	' "$@"
}

mapfile -t files < <(find "${dirs[@]}" -name '*.c' | sort)
bad=0
declare -A seen=()
while read -r where name n; do
	[ -n "$where" ] || continue
	key="${where%%:*}:$name"
	seen[$key]=1
	if printf '%s\n' "${LONG[@]}" | grep -qxF "$key"; then
		continue
	fi
	echo "$where: $name is $n lines, more than $max: split it into named steps" >&2
	bad=$((bad + 1))
done < <(long_functions "${files[@]}")
for key in "${LONG[@]}"; do
	if [ -z "${seen[$key]:-}" ]; then
		echo "check-length: $key is no longer over $max lines: take it off LONG in $0" >&2
		bad=$((bad + 1))
	fi
done
if [ "$bad" -gt 0 ]; then
	echo "check-length: $bad problem(s)" >&2
	exit 1
fi
echo "check-length: ${#files[@]} files in ${dirs[*]}, no function over $max lines but ${#LONG[@]} listed"
