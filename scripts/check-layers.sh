#!/usr/bin/env bash
# check-layers.sh [ROOT]: fail when a C file includes a header across a
# forbidden edge between Rover's layers (make check-layers; make test runs it).
#   algorithms/   only algorithms/ (and system headers)
#   common/       only common/
#   pg/           itself and common/ (PostgreSQL: only rover-brain and tests)
#   scaling/      itself, common/, algorithms/ (the glue between the two)
#   trainer/      itself and common/ (librover-trainer, loaded by training
#                 processes: no daemon code, no algorithms)
#   a daemon      itself, scaling/, common/, algorithms/; never another daemon;
#                 rover-brain also pg/
#   any of those  never tests/
#   tests/        anything
#   and inside master/, its files' order (master_tier below).
# Daemons: brain, master, agent, monitor and the names in ROVER_DAEMONS.
# Each #include "x" is resolved the way the compiler does it: first next to
# the including file, then in the folders the Makefile gives that layer
# (-iquote); a name found nowhere there but present elsewhere in the tree is
# taken to mean that file.  Names that are not ours are system headers.
# Prints "FILE:LINE: ..." for each forbidden include and exits 1.
set -euo pipefail
cd "${1:-.}"
daemons=" brain master agent monitor ${ROVER_DAEMONS:-} "

# The layer of a path: its top folder (so "tests" for anything under tests/).
layer_of() {
	case $1 in
	*/*) echo "${1%%/*}" ;;
	*) echo . ;;
	esac
}

is_daemon() { case $daemons in *" $1 "*) return 0 ;; esac; return 1; }

# The folders a layer's quoted includes are searched in, after the
# including file's own folder (as the Makefile's -iquote gives them).
search_path() {
	case $1 in
	algorithms | common) echo "$1" ;;
	trainer) echo "trainer common" ;;
	pg) echo "pg common" ;;
	tests) echo ". tests/lib scaling pg common algorithms trainer $daemons" ;;
	scaling) echo "scaling common algorithms" ;;
	brain) echo "brain scaling pg common algorithms" ;;
	*) echo "$1 scaling common algorithms" ;;
	esac
}

# What a layer may include, in words, for the error message.
rule_of() {
	case $1 in
	algorithms | common) echo "$1/ may include only $1/ and system headers" ;;
	scaling) echo "scaling/ may include only scaling/, common/ and algorithms/" ;;
	trainer) echo "trainer/ may include only trainer/ and common/" ;;
	pg) echo "pg/ may include only pg/ and common/" ;;
	brain) echo "brain/ may include only brain/, scaling/, pg/, common/ and algorithms/" ;;
	*) is_daemon "$1" && echo "$1/ is a daemon: it may include only $1/, scaling/, common/ and algorithms/, never another daemon (pg/ is the brain's alone)" ||
		echo "$1/ may include only $1/, common/ and algorithms/" ;;
	esac
}

allowed() { # from to
	local from=$1 to=$2
	[ "$from" = tests ] || [ "$from" = "$to" ] && return 0
	case $from in
	algorithms | common) return 1 ;;
	scaling) [ "$to" = common ] || [ "$to" = algorithms ] ;;
	trainer | pg) [ "$to" = common ] ;;
	*) [ "$from" = brain ] && [ "$to" = pg ] && return 0
		is_daemon "$from" && [ "$to" = scaling ] && return 0
		[ "$to" = common ] || [ "$to" = algorithms ] ;;
	esac
}

# Inside master/, the files' own order: a file includes master headers of
# its tier or one below, never one above (the state machines know nothing
# of the master that journals them; a backend nothing of the node manager).
#   0  pure state machines and interfaces: rdzv shard stream netcheck
#      journal nodes sched k8s_pod
#   1  backends and the brain link: sched_local sched_k8s sched_slurm
#      brainlink
#   2  the job state (struct master) and its threads: master state
#   3  the services it hands an operation's effects to (m->svc): plans
#      nodemgr nodelink
#   4  the edges: api main
# A new file of master/ takes a tier here first.
master_tier() { # stem -> tier, or nothing
	case $1 in
	rdzv | shard | stream | netcheck | journal | nodes | sched | k8s_pod) echo 0 ;;
	sched_local | sched_k8s | sched_slurm | brainlink) echo 1 ;;
	master | state | nodetable) echo 2 ;;
	plans | nodemgr | nodelink) echo 3 ;;
	api | main) echo 4 ;;
	esac
}

# Empty when file (of master/) may include master header target, else why not.
master_order() { # file target
	local a b ta tb
	a=$(basename -- "$1") b=$(basename -- "$2")
	a=${a%.*} b=${b%.*}
	ta=$(master_tier "$a") tb=$(master_tier "$b")
	if [ -z "$ta" ]; then
		echo "master/$a has no tier: give it one in scripts/check-layers.sh (master_tier)"
	elif [ -z "$tb" ]; then
		echo "master/$b has no tier: give it one in scripts/check-layers.sh (master_tier)"
	elif [ "$tb" -gt "$ta" ]; then
		echo "master/$a (tier $ta) may not include master/$b (tier $tb): a call back up the master's order (master/README.md)"
	fi
}

# Normalise a path relative to the root; fails for paths outside it.
norm() {
	local p
	p=$(realpath -m --relative-to=. -- "$1")
	case $p in ../* | /*) return 1 ;; esac
	echo "$p"
}

mapfile -t files < <(find . \( -path ./build -o -path ./var -o -path ./.git \) -prune -o \
	-type f \( -name '*.c' -o -name '*.h' \) -print | sed 's|^\./||' | sort)

resolve() { # file include -> path of the header in the tree, or nothing
	local file=$1 inc=$2 dir cand s f
	dir=$(dirname -- "$file")
	if cand=$(norm "$dir/$inc") && [ -f "$cand" ]; then
		echo "$cand"
		return
	fi
	for s in $(search_path "$(layer_of "$file")"); do
		if cand=$(norm "$s/$inc") && [ -f "$cand" ]; then
			echo "$cand"
			return
		fi
	done
	# Not where the compiler looks: one of ours elsewhere is still meant.
	local name=$inc
	while :; do
		case $name in
		./*) name=${name#./} ;;
		../*) name=${name#../} ;;
		*) break ;;
		esac
	done
	for f in "${files[@]}"; do
		case $f in
		"$name" | */"$name")
			echo "$f"
			return
			;;
		esac
	done
}

bad=0 n=0
for file in "${files[@]}"; do
	from=$(layer_of "$file")
	while IFS=: read -r line text; do
		inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$text")
		n=$((n + 1))
		target=$(resolve "$file" "$inc")
		[ -n "$target" ] || continue
		to=$(layer_of "$target")
		if [ "$from" != tests ] && [ "$to" = tests ]; then
			echo "$file:$line: #include \"$inc\" is $target: production code never includes tests/" >&2
			bad=$((bad + 1))
		elif ! allowed "$from" "$to"; then
			echo "$file:$line: #include \"$inc\" is $target: $(rule_of "$from")" >&2
			bad=$((bad + 1))
		elif [ "$from" = master ] && [ "$to" = master ] &&
			why=$(master_order "$file" "$target") && [ -n "$why" ]; then
			echo "$file:$line: #include \"$inc\": $why" >&2
			bad=$((bad + 1))
		fi
	done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]+"' -- "$file" || true)
done
if [ "$bad" -gt 0 ]; then
	echo "check-layers: $bad forbidden include(s); the layers are in scripts/check-layers.sh" >&2
	exit 1
fi
echo "check-layers: ${#files[@]} files, $n includes, none across a forbidden edge"
