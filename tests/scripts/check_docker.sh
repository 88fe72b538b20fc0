#!/usr/bin/env bash
# Suite for docker/Dockerfile.*: no Docker engine runs here, so each image's
# final stage is laid out in a temporary root the way `docker build` would
# (every COPY: build outputs of this tree for --from=build, files of the
# tree otherwise) and checked there:
#   - each file taken from the build stage is a target of its `make` line,
#     and that make line finds a rule for everything from only the folders
#     the build stage copies (make -n in a copy of just those), and
#     pkg-config every module the Makefile names from only the packages the
#     build stage installs (one missing empties the flags of all);
#   - each shared library the image's programs load belongs to a Debian
#     package the image installs (or one they depend on, or one every
#     Debian image has);
#   - each ROVER_<SECTION>_<KEY> the image sets names a key of the conf
#     file it ships, and the entry point reads that file and starts (--help);
#   - the worker image's rover-run, from the laid-out root, runs a worker
#     that imports Debian's torch and the image's own rover package.
# Prints one "ok"/"not ok" line per check and exits 1 if any failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
B=${B:-build}
failed=0
ok() { echo "ok - $*"; }
notok() {
	echo "not ok - $*"
	failed=1
}
TMP=$(mktemp -d /tmp/rover-docker-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# The Dockerfile's instructions, one per line (continuations joined,
# comments dropped): "STAGE<TAB>INSTRUCTION", STAGE 0 for the first FROM.
instructions() {
	awk '
	/^[ \t]*#/ { next }
	{ sub(/\r$/, "") }
	/\\$/ { sub(/\\$/, ""); line = line $0 " "; next }
	{ line = line $0; if (line ~ /[^ \t]/) print line; line = "" }' "$1" |
		awk 'toupper($1) == "FROM" { stage++ } { printf "%d\t%s\n", stage, $0 }'
}

# Lay out the last stage of $1 under $2.
layout() {
	local df=$1 root=$2 last stage ins
	last=$(instructions "$df" | cut -f1 | sort -n | tail -1)
	mkdir -p "$root"
	while IFS=$'\t' read -r stage ins; do
		[ "$stage" = "$last" ] || continue
		read -r -a w <<<"$ins"
		[ "${w[0]^^}" = COPY ] || continue
		local from= args=()
		for a in "${w[@]:1}"; do
			case $a in
			--from=*) from=${a#--from=} ;;
			--*) ;;
			*) args+=("$a") ;;
			esac
		done
		local dest=${args[-1]} srcs=("${args[@]:0:${#args[@]}-1}") s f
		for s in "${srcs[@]}"; do
			if [ -n "$from" ]; then
				f=${s#/src/}
				f=${f/#build\//$B/}
				[ -e "$f" ] || { notok "$df: COPY --from=$from $s: no $f in this tree (build first)"; continue; }
				set -- "$f"
			else
				# shellcheck disable=SC2206 # a glob, as docker expands it
				set -- $s
				[ -e "$1" ] || { notok "$df: COPY $s: nothing of that name in the tree"; continue; }
			fi
			for f in "$@"; do
				if [ -d "$f" ]; then
					mkdir -p "$root$dest"
					(cd "$f" && tar --exclude=__pycache__ -cf - .) | (cd "$root$dest" && tar -xf -)
				elif [ "${dest: -1}" = / ]; then
					mkdir -p "$root$dest" && cp -p "$f" "$root$dest"
				else
					mkdir -p "$(dirname "$root$dest")" && cp -p "$f" "$root$dest"
				fi
			done
		done
	done < <(instructions "$df")
}

# The words of instruction $2 (RUN, ENV, ...) of $1's stage $3 ("last": the final one).
words_of() {
	local df=$1 what=$2 want=$3
	[ "$want" = last ] && want=$(instructions "$df" | cut -f1 | sort -n | tail -1)
	instructions "$df" | awk -F'\t' -v s="$want" -v w="$what" \
		'$1 == s { split($2, a, " "); if (toupper(a[1]) == w) print $2 }'
}

# The Debian packages apt-get installs in stage $2 (default: the final one).
apt_packages() {
	words_of "$1" RUN "${2:-last}" | tr ' ' '\n' | awk '
	/^apt-get$/ { apt = 1; next }
	apt && $0 == "install" { inst = 1; next }
	inst && /^(&&|;|\|\|)$/ { inst = 0; apt = 0; next }
	inst && !/^-/ && $0 != "" { print }'
}

# Every package the listed ones pull in (Depends, Pre-Depends), with them,
# from dpkg's own records (the packages are installed here: the build and
# the tests need them), so no apt lists are needed.
closure() {
	dpkg-query -W -f='${Package}\t${Provides}\t${Depends}, ${Pre-Depends}\n' 2>/dev/null |
		awk -F'\t' -v want="$*" '
		function deps(s, out,   n, a, i, alt, m, b, j, name) {
			n = split(s, a, ",")
			for (i = 1; i <= n; i++) {
				m = split(a[i], b, "|")
				for (j = 1; j <= m; j++) {
					name = b[j]
					sub(/^ +/, "", name)
					sub(/[ :(].*/, "", name)
					if (name != "") out[name] = 1
				}
			}
		}
		{
			dep[$1] = $3
			np = split($2, p, ",")
			for (i = 1; i <= np; i++) {
				v = p[i]; sub(/^ +/, "", v); sub(/[ :(].*/, "", v)
				if (v != "") prov[v] = prov[v] " " $1
			}
		}
		END {
			n = split(want, q, " ")
			for (i = 1; i <= n; i++) seen[q[i]] = 1
			while (n > 0) {
				name = q[n--]
				split(prov[name], pv, " ")
				for (k in pv) if (!(pv[k] in seen)) { seen[pv[k]] = 1; q[++n] = pv[k] }
				delete d
				deps(dep[name], d)
				for (x in d) if (!(x in seen)) { seen[x] = 1; q[++n] = x }
			}
			for (x in seen) print x
		}' | sort -u
}

check_build_stage() { # df
	local df=$1 targets want dirs d
	targets=$(words_of "$df" RUN 1 | tr ' ' '\n' | grep '^build/' | sort -u)
	for want in $(words_of "$df" COPY last | tr ' ' '\n' | sed -n 's|^/src/\(build/.*\)|\1|p'); do
		if grep -qx "$want" <<<"$targets"; then ok "$df: $want is made by the build stage"; else
			notok "$df: $want is copied from the build stage, which does not make it"; fi
	done
	# the Makefile asks pkg-config for every module at once: one missing
	# (its -dev package not installed) empties the flags of them all
	local pcdir="$TMP/pc" mod pkg missing=
	rm -rf "$pcdir" && mkdir -p "$pcdir"
	# shellcheck disable=SC2046
	for pkg in $(closure $(apt_packages "$df" 1)); do
		dpkg -L "$pkg" 2>/dev/null | grep '\.pc$' | xargs -r ln -sf -t "$pcdir"
	done
	for mod in $(grep -o 'pkg_\(cflags\|libs\),[^)]*' Makefile | sed 's/pkg_[a-z]*,//' | tr ' ' '\n' | sort -u); do
		PKG_CONFIG_LIBDIR=$pcdir pkg-config --exists "$mod" || missing="$missing $mod"
	done
	if [ -z "$missing" ]; then ok "$df: its build stage installs the -dev package of every pkg-config module the Makefile names"; else
		notok "$df: its build stage installs no package with pkg-config's$missing"; fi
	dirs=$(words_of "$df" COPY 1 | awk '{ for (i = 2; i < NF; i++) print $i }')
	rm -rf "$TMP/ctx" && mkdir -p "$TMP/ctx"
	for d in $dirs; do cp -r "$d" "$TMP/ctx/"; done
	# shellcheck disable=SC2086
	if out=$(make -C "$TMP/ctx" -n $targets 2>&1); then
		ok "$df: make has a rule for $(echo $targets) from only $(echo $dirs)"
	else
		notok "$df: the build stage's make fails with only $(echo $dirs)"
		echo "$out" | grep -v '^\(cc\|gcc\|ar\|mkdir\|echo\|printf\|cp\)' | tail -5 | sed 's/^/    /'
	fi
}

check_libraries() { # df root
	local df=$1 root=$2 pkgs have f lib pkg bad=0 libs real
	local cuda=${CUDA_HOME:-/usr/local/cuda}
	pkgs=$(apt_packages "$df")
	# shellcheck disable=SC2086
	have=$( (closure $pkgs; dpkg-query -W -f='${Package} ${Priority}\n' | awk '$2 == "required" { print $1 }') | sort -u)
	libs=$(find "$root" -type f \( -perm -u+x -o -name '*.so' \) -exec ldd {} \; 2>/dev/null |
		sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' | sort -u)
	# dpkg knows a library by the path its package installed (/lib or
	# /usr/lib, the same file since the /usr merge): ask for both at once
	declare -A owner=()
	while IFS= read -r line; do
		owner[${line#*: }]=${line%%:*}
	done < <(for lib in $libs; do echo "$lib"; readlink -f "$lib"; done | sort -u |
		xargs dpkg -S 2>/dev/null)
	for lib in $libs; do
		real=$(readlink -f "$lib")
		pkg=${owner[$lib]:-${owner[$real]:-}}
		if [[ $lib == "$cuda"/* ]]; then
			ok "$df: $lib is CUDA_HOME's: its build stage has no toolkit, so it links none"
		elif [ -z "$pkg" ]; then
			notok "$df: its programs load $lib, which no Debian package holds"
			bad=1
		elif ! grep -qx "$pkg" <<<"$have"; then
			notok "$df: its programs load $lib of $pkg, which the image does not install"
			bad=1
		fi
	done
	[ $bad = 0 ] && ok "$df: the $(wc -w <<<"$libs") libraries its programs load come from packages it installs"
}

# ENV pairs of the final stage, "KEY=VALUE" per line.
env_pairs() {
	words_of "$1" ENV last | sed 's/^ENV[ \t]*//' | tr ' ' '\n' | grep '='
}

check_env_keys() { # df root
	local df=$1 root=$2 conf keys kv k
	conf=$(find "$root/etc/rover" -name '*.conf' 2>/dev/null | head -1)
	[ -n "$conf" ] || { notok "$df: no conf file under /etc/rover"; return; }
	keys=$(awk '/^\[/ { gsub(/[][]/, ""); s = toupper($0); next }
		/^# [a-z_0-9]+ =/ { print "ROVER_" s "_" toupper($2) }' "$conf")
	while read -r kv; do
		k=${kv%%=*}
		case $k in ROVER_*) ;; *) continue ;; esac
		if grep -qx "$k" <<<"$keys"; then ok "$df: $k is a key of ${conf#"$root"}"; else
			notok "$df: $k names no key of ${conf#"$root"}"; fi
	done < <(env_pairs "$df")
}

check_entrypoint() { # df root
	local df=$1 root=$2 entry conf
	entry=$(words_of "$df" ENTRYPOINT last | sed 's/^ENTRYPOINT[ \t]*//' | jq -r '.[0]')
	[ -x "$root$entry" ] || { notok "$df: its entry point $entry is not in the image"; return; }
	conf=$(find "$root/etc/rover" -name '*.conf' 2>/dev/null | head -1)
	local envs=()
	while read -r kv; do envs+=("$kv"); done < <(env_pairs "$df")
	if out=$(env "${envs[@]}" "$root$entry" --help 2>&1); then ok "$df: $entry --help"; else
		notok "$df: $entry --help failed"
		echo "$out" | tail -5 | sed 's/^/    /'
	fi
	if [ -n "$conf" ] && [[ $entry != */rover-run ]]; then
		if out=$(env "${envs[@]}" "$root$entry" --config "$conf" --print-conf 2>&1); then
			ok "$df: $entry reads ${conf#"$root"}"
		else
			notok "$df: $entry --config ${conf#"$root"} failed"
			echo "$out" | tail -5 | sed 's/^/    /'
		fi
	fi
}

check_worker() { # df root
	local df=$1 root=$2 out py
	cat >"$TMP/w.py" <<'PEOF'
import rover, torch
lib = rover._load()
print("rover=%s lib=%s torch=%s" % (rover.__file__, lib._name, torch.__file__), flush=True)
PEOF
	py=$(env_pairs "$df" | sed -n 's/^PYTHON_EXEC=//p')
	[ -n "$py" ] || py=python3
	if ! out=$(cd "$TMP" && env -i PATH=/usr/bin:/bin HOME="$TMP" PYTHON_EXEC="$py" ROVER_WARM=0 \
		"$root/usr/local/bin/rover-run" --standalone --nproc-per-node 1 "$TMP/w.py" 2>&1); then
		notok "$df: rover-run --standalone runs a worker"
		echo "$out" | tail -8 | sed 's/^/    /'
		return
	fi
	if grep -q "rover=$root/usr/local/lib/python/rover/__init__.py lib=$root/usr/local/lib/librover-trainer.so" <<<"$out"; then
		ok "$df: its rover-run gives the worker the image's rover package and librover-trainer.so"
	else
		notok "$df: the worker did not get the image's rover package and library"
		echo "$out" | tail -5 | sed 's/^/    /'
	fi
	local tf pkg
	tf=$(sed -n 's/.* torch=\(.*\)/\1/p' <<<"$out" | tail -1)
	pkg=$(dpkg -S "$tf" 2>/dev/null | cut -d: -f1)
	if [ -n "$pkg" ] && apt_packages "$df" | grep -qx "$pkg"; then
		ok "$df: the worker's torch ($tf) is $pkg, which the image installs"
	else
		notok "$df: the worker's torch ($tf) is not from a package the image installs (${pkg:-none})"
	fi
}

command -v jq >/dev/null || { notok "jq is needed (scripts/install-deps.sh)"; exit 1; }
for df in docker/Dockerfile.*; do
	name=${df##*.}
	root="$TMP/root-$name"
	layout "$df" "$root"
	check_build_stage "$df"
	check_libraries "$df" "$root"
	check_env_keys "$df" "$root"
	check_entrypoint "$df" "$root"
	[ "$name" = worker ] && check_worker "$df" "$root"
done
exit $failed
