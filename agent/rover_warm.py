"""rover_warm.py: the warm interpreter of rover-run (agent/warm.c starts it).

It imports torch (or the modules named by --import) once, stays single-threaded,
and then forks a worker per request from that warm state: a restarted worker
skips the ~1.5 s import and starts in milliseconds.

Protocol, on the unix stream socket passed as --fd: every message is a native
uint32 length and that many bytes of JSON.  First the server says
{"ready": true, ...} or {"error": "...", "detail": "..."} (then exits 1).  Each
request {"argv": [...], "module": bool, "unbuffered": bool, "refill": bool,
"env": {...}, "cwd": "..."} carries the worker's stdin, stdout and stderr as three fds
(SCM_RIGHTS); the answer is {"pid": N} or {"error": "...", "refused": bool}
("refused": the request cannot be served warm, run it cold).  Notices may come
between answers: {"standby": pid} (a worker forked in advance, now the
agent's child, for the agent to reap should it die unused) and
{"notice": "..."}.  End of file on the socket ends the server, and with it
the standbys.

The worker is made a child of the agent, not of this server: the server forks
a short-lived intermediate, which forks the worker, puts it in its own process
group and exits; the agent is a child subreaper (PR_SET_CHILD_SUBREAPER), so
the orphaned worker is reparented to it and the agent reaps it with its real
exit status.  Only then does the worker set PR_SET_PDEATHSIG (a death signal
set earlier would fire when the intermediate exits).

Those two forks and an exit cost ~20 ms, so --standby N workers are forked in
advance, once the server has been idle for REFILL_IDLE_S: each waits, already
the agent's child, for its request on a socketpair of its own; a request
handed to one is running within a millisecond.  A standby is a copy of the
same warm state: nothing in this process changes after the imports.  A
request with "refill": false is served without forking its replacement, and
so is every one after it until a request without it: the network check's
collectives, on a node whose CPU may be short, take the standbys kept for
them and leave that CPU to the check.

Single-threaded on purpose: OpenMP's pool and most threads do not survive
fork(), so a thread in this process would hang every worker; a request that
finds a second thread in /proc/self/task is refused with the threads' names.
Libraries that stop their own threads before a fork (OpenBLAS's pool, started
when numpy or torch loads it) are given that chance once after the imports
(settle_threads).
"""

import ctypes
import importlib
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback

PR_SET_PDEATHSIG = 1
HEADER = struct.Struct("=I")
MAX_MSG = 16 << 20

# Settings a Python reads once at start: a worker asking for other values
# than this interpreter started with must be run cold.
FIXED_AT_START = ("PYTHONHASHSEED", "PYTHONOPTIMIZE", "PYTHONHOME", "PYTHONMALLOC",
                  "PYTHONDEVMODE", "PYTHONUTF8", "PYTHONNOUSERSITE", "PYTHONPLATLIBDIR",
                  # the locale picks the encodings and UTF-8 mode at start
                  "LC_ALL", "LC_CTYPE", "LANG")

# A script with this text in its first 4 KiB is never run warm.
OPT_OUT_MARKER = b"rover: cold-start"

# The handlers a fresh interpreter has, taken before any import: each worker
# gets them back (a handler of this server, or one a library set in C, must
# not run in user code).
FRESH_HANDLERS = {}


def snapshot_handlers():
    for s in range(1, signal.NSIG):
        if s in (signal.SIGKILL, signal.SIGSTOP) or s >= 32:
            continue
        try:
            h = signal.getsignal(s)
        except (ValueError, OSError):
            continue
        FRESH_HANDLERS[s] = signal.SIG_DFL if h is None else h


# Threads whose library makes fork() safe by itself: jemalloc's background
# purging thread (jemalloc takes its locks in a fork handler, and the child
# starts with background threads off, starting them again when needed).
FORK_SAFE_THREADS = {"jemalloc_bg_thd"}


def thread_names():
    """The names of this process's threads but the fork-safe ones; the
    calling thread first."""
    names = []
    for tid in sorted(os.listdir("/proc/self/task"), key=int):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                name = f.read().strip()
        except OSError:
            name = tid
        if int(tid) == os.getpid() or name not in FORK_SAFE_THREADS:
            names.append(name)
    return names


def quiet_fork():
    """os.fork() without Python 3.12's warning of a fork with threads: the
    threads left here (jemalloc's) are ones that survive a fork."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def settle_threads():
    """Threads the imports left, after giving their libraries the chance to
    stop them.  OpenBLAS (numpy's, and torch's through it) starts a pool of
    one thread per core when it loads, and stops that pool in a fork handler
    (pthread_atfork) before every fork, starting it again at its next call.
    One throwaway fork here runs those handlers: the pool is gone from this
    process (it never calls BLAS), and each worker starts its own pool at its
    first BLAS call, as a fresh interpreter would.  Returns the names of the
    threads left; one means safe to fork."""
    names = thread_names()
    if len(names) == 1:
        return names
    pid = quiet_fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return thread_names()


def send(sock, obj):
    body = json.dumps(obj).encode()
    sock.sendall(HEADER.pack(len(body)) + body)


def recv_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def recv(sock):
    """One request and its fds; None at end of file."""
    fds = []
    head = b""
    while len(head) < HEADER.size:
        data, anc, _flags, _addr = sock.recvmsg(HEADER.size - len(head),
                                                socket.CMSG_SPACE(8 * 4))
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                n = len(payload) - len(payload) % 4
                fds.extend(struct.unpack("%di" % (n // 4), payload[:n]))
        if not data:
            for fd in fds:
                os.close(fd)
            return None, []
        head += data
    (length,) = HEADER.unpack(head)
    try:
        if length > MAX_MSG:
            raise ValueError("request of %d bytes" % length)
        return json.loads(recv_exact(sock, length)), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def refuse_reason(req, server_env):
    """Why this request cannot be run warm, or None."""
    env = req.get("env") or {}
    if env.get("ROVER_WARM") == "0":
        return "ROVER_WARM=0 in the worker's environment"
    for key in FIXED_AT_START:
        if env.get(key) != server_env.get(key):
            return "%s differs from the warm interpreter's (read once at start)" % key
    if not req.get("module"):
        script = os.path.join(req.get("cwd") or "/", req["argv"][0])
        try:
            with open(script, "rb") as f:
                if OPT_OUT_MARKER in f.read(4096):
                    return "the script is marked \"%s\"" % OPT_OUT_MARKER.decode()
        except OSError:
            pass  # the worker reports it as python would
    names = thread_names()
    if len(names) != 1:
        return ("the warm interpreter has %d threads (%s): forking it would hang the "
                "worker" % (len(names), ", ".join(names)))
    return None


def fork_child(child_main):
    """Fork child_main(go_r) (which never returns) through an intermediate,
    so that it becomes the agent's child; returns its pid once it is."""
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    # The go-ahead: written once the intermediate is reaped, i.e. once the
    # child belongs to the agent.  (Its end of file would come too early:
    # an exiting process closes its files before its children are
    # reparented.)
    go_r, go_w = os.pipe()
    mid = quiet_fork()
    if mid == 0:
        code = 1
        try:
            os.close(r)
            os.close(go_w)
            pid = quiet_fork()
            if pid == 0:
                os.close(w)
                child_main(go_r)  # never returns
            # Both sides set the group, so it exists before the agent hears
            # the pid (the shell's way).
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass
            os.write(w, HEADER.pack(pid))
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    os.close(go_r)
    data = b""
    try:
        data = os.read(r, HEADER.size)
    finally:
        os.close(r)
        _, st = os.waitpid(mid, 0)
        if len(data) == HEADER.size and os.waitstatus_to_exitcode(st) == 0:
            os.write(go_w, b"1")
        os.close(go_w)  # without the byte: the child exits
    if len(data) != HEADER.size or os.waitstatus_to_exitcode(st) != 0:
        raise OSError("the intermediate process failed (status %d)" % st)
    return HEADER.unpack(data)[0]


def leave_server(go_r, agent, keep=None):
    """First thing in a forked child: let go of the server's sockets (the
    agent and the standbys must see end of file when the server dies), wait
    for the go-ahead, then die with the agent."""
    try:
        SERVER_SOCKS[0].close()
        for _pid, ctrl in STANDBYS:
            if ctrl is not keep:
                ctrl.close()
        go = os.read(go_r, 1)
        os.close(go_r)
        if go != b"1":
            os._exit(1)  # the server failed or died before the hand-over
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            os._exit(1)
        if os.getppid() != agent:
            os._exit(1)  # the agent died meanwhile: nobody will reap or stop us
    except BaseException:
        os._exit(1)


def worker(req, fds):
    """Become the worker of req and run it; never returns."""
    code = 1
    try:
        setup(req, fds)
        code = run_main(req)
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    os._exit(code)


def spawn_now(req, fds, agent):
    """Fork a worker for req now; returns its pid."""
    def child(go_r):
        leave_server(go_r, agent)
        worker(req, fds)
    return fork_child(child)


def make_standby(agent):
    """Fork a worker in advance: it waits, already the agent's child, for
    its request on a socketpair.  Returns (pid, the server's end)."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def child(go_r):
        mine.close()
        leave_server(go_r, agent, keep=theirs)
        try:
            req, fds = recv(theirs)
        except BaseException:
            os._exit(1)
        if req is None:
            os._exit(0)  # the server is gone: no request will come
        theirs.close()
        worker(req, fds)
    try:
        pid = fork_child(child)
    finally:
        theirs.close()
    return pid, mine


def hand_to_standby(req, fds):
    """Give req to a standby; its pid, or None when none took it."""
    while STANDBYS:
        pid, ctrl = STANDBYS.pop(0)
        try:
            body = json.dumps(req).encode()
            socket.send_fds(ctrl, [HEADER.pack(len(body)) + body], fds)
            return pid
        except OSError:
            continue  # it died: the agent reaps it
        finally:
            ctrl.close()
    return None


def setup(req, fds):
    """Turn this fork of the server into the process req describes."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass

    signal.set_wakeup_fd(-1)
    for s, h in FRESH_HANDLERS.items():
        try:
            signal.signal(s, h)
        except (OSError, ValueError, RuntimeError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])

    for i, fd in enumerate(fds[:3]):
        os.dup2(fd, i)
    for fd in fds:
        if fd > 2:
            os.close(fd)

    env = req.get("env") or {}
    os.environ.clear()
    os.environ.update(env)
    os.chdir(req.get("cwd") or "/")
    unbuffered = bool(env.get("PYTHONUNBUFFERED")) or bool(req.get("unbuffered"))
    enc = sys.stdout.encoding
    # Line-buffered (python's own default on a tty): a line printed before a
    # SIGKILL is not lost, and none is written twice.
    sys.stdout = sys.__stdout__ = text_stream(1, enc, "strict", unbuffered)
    sys.stderr = sys.__stderr__ = text_stream(2, enc, "backslashreplace", True)
    sys.stdin = sys.__stdin__ = open(0, "r", encoding=enc, closefd=False)

    argv = list(req["argv"])
    rest = [p for p in sys.path[1:] if p not in SERVER_PYTHONPATH]
    user_pp = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(":") if p]
    if req.get("module"):
        path0 = os.getcwd()
    else:
        path0 = os.path.dirname(os.path.realpath(argv[0]))
    sys.path[:] = [path0] + user_pp + rest
    sys.argv[:] = argv
    sys.orig_argv[:] = ([sys.executable] + (["-u"] if req.get("unbuffered") else []) +
                        (["-m"] if req.get("module") else []) + list(req["argv"]))
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    if env.get("PYTHONFAULTHANDLER"):
        import faulthandler
        faulthandler.enable()

    # Random state: numpy's global generator and torch's default one are
    # seeded from the OS at start in a fresh process; here they are the
    # server's, so every worker would draw the same numbers.  (random
    # reseeds itself after fork.)
    if "random" in sys.modules:
        sys.modules["random"].seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()
        # Read from the environment when the library loaded, i.e. in the
        # server: apply the worker's own.
        n = env.get("OMP_NUM_THREADS", "")
        if n.isdigit() and int(n) > 0:
            torch.set_num_threads(int(n))


def text_stream(fd, encoding, errors, write_through):
    # As python builds its stdio: unbuffered (-u) is the raw file itself
    # under a write-through text layer.
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw if write_through else io.BufferedWriter(raw),
                            encoding=encoding, errors=errors, line_buffering=True,
                            write_through=write_through)


def exit_code(e):
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xff
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1


def run_script(script):
    """What python does for `python script.py`: compile the file under its
    absolute name and run it in a fresh __main__, sys.argv left as given."""
    import builtins
    import importlib.machinery
    import runpy
    import types
    if not os.path.isfile(script):
        # A folder or a zip file with a __main__.py: runpy knows those.
        argv0 = sys.argv[0]
        runpy.run_path(script, run_name="__main__")
        sys.argv[0] = argv0
        return
    main = types.ModuleType("__main__")
    main.__file__ = script
    main.__cached__ = None
    main.__annotations__ = {}
    main.__builtins__ = builtins
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
    sys.modules["__main__"] = main
    with io.open_code(script) as f:
        code = compile(f.read(), script, "exec", dont_inherit=True)
    exec(code, main.__dict__)


def run_main(req):
    """Run the script as __main__ the way python does; returns the exit code."""
    import runpy
    argv = req["argv"]
    code = 0
    interrupted = False
    try:
        if req.get("module"):
            runpy._run_module_as_main(argv[0], alter_argv=True)
        else:
            script = os.path.abspath(argv[0])
            if not os.path.exists(script):
                print("%s: can't open file %r: [Errno 2] No such file or directory"
                      % (sys.executable, script), file=sys.stderr)
                return 2
            run_script(script)
    except SystemExit as e:
        code = exit_code(e)
    except BaseException as e:
        interrupted = isinstance(e, KeyboardInterrupt)
        # The traceback python would print: from the script's own frame,
        # without runpy's and ours.
        tb = e.__traceback__
        if not req.get("module"):
            t = tb
            while t is not None and t.tb_frame.f_code.co_filename != script:
                t = t.tb_next
            tb = t or tb
            e.__traceback__ = tb
        try:
            sys.excepthook(type(e), e, tb)
        except BaseException:
            pass
        code = 1
    code = finish(code)
    if interrupted:
        # As python does: die of the SIGINT that was not handled.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def finish(code):
    """What python's finalisation does that a user can see."""
    import atexit
    import threading
    try:
        threading._shutdown()
    except BaseException:
        pass
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            if code == 0:
                code = 120
    return code


SERVER_PYTHONPATH = []
SERVER_SOCKS = []  # [the agent's socket]
STANDBYS = []      # [(pid, socket)] of workers forked in advance, oldest first


# Standbys are forked once no request came for this long: workers restarted
# together ask within a few ms of each other, and a fork (~20 ms) between
# their requests would delay the next one.
REFILL_IDLE_S = 0.05


def refill(sock, want, agent):
    """Fork standbys up to want, each told to the agent, while no request
    comes: a request that comes is served first."""
    while len(STANDBYS) < want:
        if select.select([sock], [], [], REFILL_IDLE_S)[0] or len(thread_names()) != 1:
            return
        try:
            STANDBYS.append(make_standby(agent))
        except OSError as e:
            send(sock, {"notice": "could not fork a standby worker: %s" % e})
            return
        send(sock, {"standby": STANDBYS[-1][0]})


# Modules a worker of a module named here imports on first use, when they
# exist: torch 2.x imports torch._dynamo (sympy and more, seconds) the first
# time an optimizer is built, so a restarted worker would pay it again.
# Imported after the module when present; one that is absent (torch 1.x) or
# fails is skipped, not an error.
USED_SOON = {"torch": ("torch.optim", "torch._dynamo")}


def serve(sock, imports, standby):
    start = time.monotonic()
    failed = None
    try:
        for failed in imports:
            importlib.import_module(failed)
    except BaseException as e:
        send(sock, {"error": "could not import %s: %s" % (failed, e),
                    "detail": traceback.format_exc()})
        return 1
    for name in imports:
        for soon in USED_SOON.get(name, ()):
            try:
                importlib.import_module(soon)
            except Exception:
                pass  # not in this version: the worker imports it, if ever
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        send(sock, {"error": "importing %s initialised CUDA: a forked worker could not use "
                    "the GPU" % ", ".join(imports)})
        return 1
    names = settle_threads()
    if len(names) != 1:
        send(sock, {"error": "importing %s left %d threads (%s): a fork would hang" %
                    (", ".join(imports), len(names), ", ".join(names))})
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    server_env = dict(os.environ)
    agent = os.getppid()
    send(sock, {"ready": True, "pid": os.getpid(), "threads": 1,
                "import_ms": int((time.monotonic() - start) * 1000),
                "python": sys.version.split()[0]})
    hold = False  # the last request said "refill": false
    while True:
        if not hold:
            refill(sock, standby, agent)
        try:
            req, fds = recv(sock)
        except (ValueError, EOFError, OSError) as e:
            send(sock, {"error": "bad request: %s" % e, "refused": True})
            continue
        if req is None:
            return 0
        hold = isinstance(req, dict) and req.get("refill") is False
        try:
            if not isinstance(req.get("argv"), list) or not req["argv"] or len(fds) != 3:
                reply = {"error": "bad request: no argv or not 3 fds", "refused": True}
            else:
                why = refuse_reason(req, server_env)
                if why:
                    reply = {"error": why, "refused": True}
                else:
                    pid = hand_to_standby(req, fds)
                    reply = {"pid": pid if pid else spawn_now(req, fds, agent)}
        except Exception as e:
            reply = {"error": "could not fork the worker: %s" % e, "refused": False}
        finally:
            for fd in fds:
                os.close(fd)
        send(sock, reply)


def main(argv):
    fd = None
    imports = []
    standby = 1
    i = 1
    while i < len(argv):
        if argv[i] == "--fd" and i + 1 < len(argv):
            fd = int(argv[i + 1])
            i += 2
        elif argv[i] == "--import" and i + 1 < len(argv):
            imports.extend(m for m in argv[i + 1].split(",") if m)
            i += 2
        elif argv[i] == "--standby" and i + 1 < len(argv):
            standby = int(argv[i + 1])
            i += 2
        else:
            print("usage: rover_warm.py --fd N [--import mod,mod] [--standby N]",
                  file=sys.stderr)
            return 2
    if fd is None:
        print("rover_warm.py: --fd is required", file=sys.stderr)
        return 2
    snapshot_handlers()
    for p in os.environ.get("PYTHONPATH", "").split(":"):
        if p:
            SERVER_PYTHONPATH.extend((p, os.path.abspath(p)))
    # The server's own folder is sys.path[0] and goes with it in each worker.
    sock = socket.socket(fileno=fd)
    SERVER_SOCKS.append(sock)
    return serve(sock, imports or ["torch", "torch.distributed"], standby)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
