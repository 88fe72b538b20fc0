#!/bin/bash
# slurmfix.sh: a private Slurm cluster for tests: munged, slurmctld, N slurmd
# and slurmrestd, every file in one folder (config, state, spool, munge key
# and socket, pid files, logs), ports of its own.
#
#   slurmfix.sh start DIR [NODES] [netns|local] [WATCH_PID]
#   slurmfix.sh stop DIR
#
# Each node has SLURMFIX_CPUS CPUs (default 2) and 4096 MB.
# start prints shell assignments (SLURM_CONF=..., SLURMFIX_REST=... unix
# socket, SLURMFIX_NODES="n1 n2", SLURMFIX_MODE, SLURMFIX_HOSTIP=...) on
# stdout once every node is idle; it exits non-zero (the logs on stderr)
# when the cluster did not come up, after stopping what it started.
# netns: each slurmd in a network namespace of its own (rvsN-<tag>), joined to
# this host by a veth pair (10.<a>.<b>.0/30), its NodeAddr that address;
# local: every slurmd on this host (slurmd -N name, ports of their own).
# With WATCH_PID, a watcher stops the cluster once that process is gone (a
# killed test suite leaves nothing behind).  Needs root (munged's key,
# namespaces); slurmrestd runs as nobody, as it refuses root.
set -u
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR [NODES] [netns|local] [WATCH_PID]" >&2; exit 2; }
SBIN=/usr/sbin

free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 30000))
		ss -Hltn "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
	done
	return 1
}

stop() {
	local f
	[ -f "$dir/watch.pid" ] && kill "$(cat "$dir/watch.pid")" 2>/dev/null
	for f in "$dir"/run/slurmrestd.pid "$dir"/run/slurmd-*.pid "$dir"/run/slurmctld.pid; do
		[ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
	done
	# jobs' processes (slurmstepd and below) end with their slurmd's steps
	sleep 0.5
	for f in "$dir"/run/slurmrestd.pid "$dir"/run/slurmd-*.pid "$dir"/run/slurmctld.pid; do
		[ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
	done
	[ -f "$dir/run/munged.pid" ] && kill -TERM "$(cat "$dir/run/munged.pid")" 2>/dev/null
	if [ -f "$dir/netns.list" ]; then
		while read -r ns; do
			ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
			ip netns del "$ns" 2>/dev/null
		done <"$dir/netns.list"
	fi
	rm -f "$dir"/run/*.pid "$dir/netns.list"
}

watch() {
	local pid=$1
	while kill -0 "$pid" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done
	rm -f "$dir/watch.pid"
	stop
}

write_conf() {
	local nodes=$1 mode=$2 cport=$3 i name addr port
	cat >"$dir/etc/slurm.conf" <<CONF
ClusterName=rover$$
SlurmctldHost=$(hostname -s)($HOSTIP)
SlurmctldPort=$cport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MpiDefault=none
# nodes may claim more CPUs than this machine has (SLURMFIX_CPUS)
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=10
SlurmctldTimeout=10
MessageTimeout=5
InactiveLimit=0
MinJobAge=300
KillWait=5
SlurmctldDebug=info
SlurmdDebug=info
CONF
	for i in $(seq 1 "$nodes"); do
		name=rvn$i
		if [ "$mode" = netns ]; then
			addr=$(node_ip "$i")
			port=$SDPORT
		else
			addr=$HOSTIP
			port=$(free_port)
		fi
		echo "NodeName=$name NodeHostname=$name NodeAddr=$addr Port=$port CPUs=$CPUS RealMemory=4096 State=UNKNOWN" >>"$dir/etc/slurm.conf"
	done
	echo "PartitionName=rover Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$dir/etc/slurm.conf"
}

# 10.<200+x>.<i>.2 inside, .1 on this host; x from the folder so parallel
# clusters differ
node_ip() { echo "10.$NET.$1.2"; }
host_ip() { echo "10.$NET.$1.1"; }

make_netns() {
	local i=$1
	local ns="rvs$i-$TAG" hv="rvh$i$TAG" nv="rvc$i$TAG"
	ip netns add "$ns" || return 1
	echo "$ns" >>"$dir/netns.list"
	ip link add "$hv" type veth peer name "$nv" || return 1
	ip link set "$nv" netns "$ns" || return 1
	ip addr add "$(host_ip "$i")/24" dev "$hv" && ip link set "$hv" up || return 1
	ip -n "$ns" addr add "$(node_ip "$i")/24" dev "$nv" || return 1
	ip -n "$ns" link set "$nv" up && ip -n "$ns" link set lo up || return 1
	ip -n "$ns" route add default via "$(host_ip "$i")" || return 1
}

fail() {
	echo "slurmfix: $1" >&2
	tail -n 20 "$dir"/log/*.log >&2 2>/dev/null
	stop
	exit 1
}

start() {
	local nodes=${3:-2} mode=${4:-netns} watch_pid=${5:-} i
	CPUS=${SLURMFIX_CPUS:-2}
	mkdir -p "$dir"/{etc,state,spool,run,log,munge,rest} || exit 1
	dir=$(cd "$dir" && pwd)
	chmod 755 "$dir"
	TAG=$(printf '%s' "$dir" | cksum | cut -c1-4)
	NET=$((200 + $(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 50))
	SDPORT=$(free_port) || fail "no free port"
	if [ "$mode" = netns ]; then
		for i in $(seq 1 "$nodes"); do
			make_netns "$i" || fail "could not make network namespace $i"
		done
		# the host's side of node 1's link: slurmctld and the master are
		# reached there from every namespace (routes via the default)
		HOSTIP=$(host_ip 1)
		sysctl -qw net.ipv4.ip_forward=1
	else
		HOSTIP=127.0.0.1
	fi
	local cport
	cport=$(free_port) || fail "no free port"
	{
		cat /etc/hosts
		for i in $(seq 1 "$nodes"); do
			[ "$mode" = netns ] && echo "$(node_ip "$i") rvn$i"
		done
	} >"$dir/etc/hosts"
	write_conf "$nodes" "$mode" "$cport"
	# munge: key and socket of our own
	dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
	chmod 700 "$dir/munge"
	chmod 400 "$dir/munge/munge.key"
	$SBIN/munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
		--pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
		--seed-file="$dir/munge/seed" || fail "munged did not start"
	chmod 755 "$dir/munge"
	export SLURM_CONF="$dir/etc/slurm.conf"
	if [ -n "$watch_pid" ]; then
		setsid "$0" __watch "$dir" "$watch_pid" </dev/null >/dev/null 2>&1 &
		echo $! >"$dir/watch.pid"
	fi
	$SBIN/slurmctld -i -f "$SLURM_CONF" || fail "slurmctld did not start"
	for i in $(seq 1 "$nodes"); do
		mkdir -p "$dir/spool/rvn$i"
		if [ "$mode" = netns ]; then
			# a network namespace and a hostname of its own, and a hosts
			# file naming every node (nsenter keeps our mounts: ip netns
			# exec remounts /sys, losing the cgroup mount slurmd wants)
			nsenter --net="/run/netns/rvs$i-$TAG" unshare --uts --mount sh -c \
				"mount --bind $dir/etc/hosts /etc/hosts && hostname rvn$i &&
				 exec $SBIN/slurmd -N rvn$i -f $SLURM_CONF" ||
				fail "slurmd rvn$i did not start"
		else
			$SBIN/slurmd -N "rvn$i" -f "$SLURM_CONF" || fail "slurmd rvn$i did not start"
		fi
	done
	# slurmrestd refuses root: nobody, its socket in a folder nobody owns
	chown nobody "$dir/rest"
	setsid runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" $SBIN/slurmrestd \
		-a rest_auth/local -s openapi/v0.0.38 "unix:$dir/rest/slurmrestd.socket" \
		</dev/null >>"$dir/log/slurmrestd.log" 2>&1 &
	echo $! >"$dir/run/slurmrestd.pid"
	local up=0
	for _ in $(seq 150); do
		if [ "$(sinfo -h -o '%t' 2>/dev/null | grep -c idle)" -ge 1 ] &&
			[ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle')" -eq "$nodes" ] &&
			[ -S "$dir/rest/slurmrestd.socket" ]; then
			up=1
			break
		fi
		sleep 0.2
	done
	[ $up = 1 ] || fail "the nodes did not become idle: $(sinfo -h -N -o '%N %t' 2>&1 | tr '\n' ' ')"
	echo "SLURM_CONF=$SLURM_CONF"
	echo "SLURMFIX_REST=$dir/rest/slurmrestd.socket"
	echo "SLURMFIX_NODES=\"$(seq -f 'rvn%g' -s ' ' 1 "$nodes")\""
	echo "SLURMFIX_MODE=$mode"
	echo "SLURMFIX_HOSTIP=$HOSTIP"
	echo "SLURMFIX_TAG=$TAG"
}

case $cmd in
start) start "$@" ;;
stop) stop ;;
__watch) watch "$3" ;;
*) echo "slurmfix: unknown command $cmd" >&2; exit 2 ;;
esac
