#!/usr/bin/env bash
# check-readmes.sh [TOP]: fail when a README no longer matches the code
# (make check-readmes; make test runs it).  Under TOP (default: this tree):
#  - files: every source file (*.c, *.h, *.py, *.sh, *.mjs) in a folder that
#    has a README.md is named in that README's file list (its "## Files..."
#    section; the whole README when it has none): its file name (`nodes.c`,
#    master/nodes.c) or its stem with the extension in braces (`nodes.{h,c}`);
#  - names: every name a README.md anywhere gives in backticks exists in the
#    code.  A name is a backticked lowercase snake_case word, with or
#    without "()": `store_plan_insert`, `plan_job()`, and as well
#    `node_ttl_s` (functions, config keys, fields, tables and columns alike:
#    a README naming any of them must stay true).  It exists when it is a
#    word of some file under TOP that is not Markdown (code, SQL, conf,
#    scripts, test data).  A `struct x_y` or a path is not a name (the span
#    holds more than the word).
# OUTSIDE lists the names of other projects the READMEs cite.
set -euo pipefail
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top"

# Names of other projects (first word or whole name), with why.
OUTSIDE=(
	gsl_                # GSL's own functions (algorithms/README.md)
	cpu_stat_show       # the kernel's, cited by tests/common/fixtures/README.md
	cpu_extra_stat_show # idem
)

outside() {
	local o
	for o in "${OUTSIDE[@]}"; do
		[[ $o == *_ && $1 == "$o"* ]] && return 0
		[[ $1 == "$o" ]] && return 0
	done
	return 1
}

prune=(-path ./build -o -path ./.git -o -name node_modules -o -path ./var)
mapfile -t readmes < <(find . \( "${prune[@]}" \) -prune -o -name README.md -type f -print | sort)
bad=0

list=$(mktemp)
words=$(mktemp)
trap 'rm -f "$list" "$words"' EXIT
for r in "${readmes[@]}"; do
	d=$(dirname "$r")
	if grep -q '^## Files' "$r"; then
		awk '/^## /{on = /^## Files/} on' "$r" >"$list"
	else
		cp "$r" "$list"
	fi
	for f in "$d"/*.c "$d"/*.h "$d"/*.py "$d"/*.sh "$d"/*.mjs; do
		[ -f "$f" ] || continue
		b=$(basename "$f")
		stem=${b%.*} ext=${b##*.}
		grep -qP "(?<![\\w.-])\\Q$b\\E(?![\\w])" "$list" && continue
		grep -qP "(?<![\\w.-])\\Q$stem\\E\\.\\{[a-z,]*\\b$ext\\b[a-z,]*\\}" "$list" && continue
		echo "${r#./}: does not name ${f#./} (its folder's file list)" >&2
		bad=$((bad + 1))
	done
done

# Every word of the files that are not Markdown.
# Not this script nor its suite: they hold names only to test this one.
find . \( "${prune[@]}" -o -path ./scripts/check-readmes.sh -o -path ./tests/scripts/check_readmes.sh \) \
	-prune -o -type f ! -name '*.md' -print0 |
	xargs -0 grep -IohE '[A-Za-z_][A-Za-z0-9_]*' 2>/dev/null | sort -u >"$words" || true

for r in "${readmes[@]}"; do
	while IFS=: read -r line span; do
		name=${span#\`}
		name=${name%\`}
		name=${name%()}
		outside "$name" && continue
		grep -qxF -- "$name" "$words" && continue
		echo "${r#./}:$line: names $span, which is nowhere in the code" >&2
		bad=$((bad + 1))
	done < <(grep -noP '`[a-z][a-z0-9]*(_[a-z0-9]+)+(\(\))?`' "$r" || true)
done

if [ "$bad" -gt 0 ]; then
	echo "check-readmes: $bad README entries do not match the code" >&2
	exit 1
fi
echo "check-readmes: ${#readmes[@]} READMEs match the code"
