"""What the benchmarks written in Python share: finding a worker's pid from
the one its launcher logs, stopping a launcher and what it left, log times, the
lines recovery_ddp.py prints, a free loopback port and a line on stderr."""
import datetime
import glob
import os
import re
import signal
import socket
import subprocess
import sys

STEP = re.compile(r"step=(\d+) rank=(\d+) restart=(\d+) \S+ t=([\d.]+)")
START = re.compile(r"start rank=(\d+) pid=(\d+) restart=(\d+) t=([\d.]+)")
PG = re.compile(r"pg rank=(\d+) restart=(\d+) t=([\d.]+)")
TS = re.compile(r"^ts=(\S+) .*?msg=\"([^\"]+)\"(.*)$")


def say(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def host_pid(root, pid):
    """The pid here of the process below root whose own pid is pid (rover-run's
    job has a PID namespace of its own, whose pids its workers print: the last
    of NSpid in /proc/PID/status; torchrun's workers print the same), or None
    when no process below root has it."""
    kids = {}
    for s in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(s) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(s.split("/")[2]))
    todo = [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            try:
                with open("/proc/%d/status" % c) as f:
                    ns = [l.split()[1:] for l in f if l.startswith("NSpid:")]
            except OSError:
                continue
            if ns and ns[0] and int(ns[0][-1]) == pid:
                return c
            todo.append(c)
    return None


def session_kill(sid):
    """SIGKILL every process of session sid (what a launcher left)."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
            if int(st[st.rindex(")") + 2:].split()[3]) == sid:
                os.kill(int(p), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def stop_launcher(p):
    """SIGTERM launcher p (a subprocess in a session of its own) and wait up
    to 15 s for it, then SIGKILL what is left of its session."""
    try:
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        pass
    session_kill(p.pid)
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def stop_run(procs, d):
    """stop_launcher each of procs, the last started first, then remove the
    run's folder d (kept, and named, with BENCH_KEEP set)."""
    for p in reversed(procs):
        stop_launcher(p)
    if os.environ.get("BENCH_KEEP"):
        say("kept " + d)
    else:
        subprocess.run(["rm", "-rf", d])


def ts_of(s):
    """A log line's ts= (UTC, milliseconds) as seconds since the epoch."""
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
