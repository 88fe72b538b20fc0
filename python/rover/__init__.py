"""rover: data shards, step reports and flash checkpoints for a training
script run by rover-run, over librover-trainer (ctypes, no build needed).

    import rover, torch
    sampler = rover.ShardSampler()             # sample indices from the master
    ckpt = rover.Checkpointer(model, optimizer)
    step = ckpt.load() or 0                    # newest complete copy, or None
    for step, i in enumerate(sampler, start=step + 1):
        loss = model(data[i]).sum(); loss.backward(); optimizer.step()
        rover.report_step(step, 1)
        ckpt.save(step)                        # copied while the next step runs

The library is found through $ROVER_TRAINER_LIB, else next to the package
(<prefix>/lib/librover-trainer.so for python/rover or lib/python/rover, and
build/lib/ in a source tree).  Errors raise rover.Error (an OSError with the
errno and the library's message).
"""
import atexit
import ctypes
import errno as _errno
import os
import pickle
import sys
import threading
import time
import types
import warnings as _warnings
import weakref

__all__ = ["Error", "Trainer", "ShardSampler", "Checkpointer", "ComputeTimer", "report_step", "trainer",
           "RedisStream", "StreamSampler", "Record"]

SHARD, WAIT, FINISHED = 0, 1, 2


class Error(OSError):
    """A call of librover-trainer failed: errno and the library's message."""


class _Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("field", ctypes.c_char * 128), ("msg", ctypes.c_char * 512)]


class _Opts(ctypes.Structure):
    _fields_ = [("master", ctypes.c_char_p), ("node", ctypes.c_char_p), ("job", ctypes.c_char_p),
                ("dataset", ctypes.c_char_p), ("rank", ctypes.c_int), ("local_rank", ctypes.c_int),
                ("world_size", ctypes.c_int), ("timeout_ms", ctypes.c_int)]


class _Shard(ctypes.Structure):
    _fields_ = [("dataset", ctypes.c_char * 64), ("id", ctypes.c_int64), ("start", ctypes.c_int64),
                ("end", ctypes.c_int64), ("epoch", ctypes.c_int32), ("partition", ctypes.c_char * 64)]


class _Stats(ctypes.Structure):
    _fields_ = [("stall_s", ctypes.c_double), ("copy_s", ctypes.c_double), ("bytes", ctypes.c_uint64),
                ("slot", ctypes.c_int), ("reported", ctypes.c_int), ("report_failed", ctypes.c_int)]


_lib = None


def _candidates():
    env = os.environ.get("ROVER_TRAINER_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    name = "librover-trainer.so"
    return [os.path.join(here, name),
            os.path.join(here, "..", "..", name),               # <prefix>/lib/python/rover
            os.path.join(here, "..", "..", "build", "lib", name),  # a source tree
            os.path.join(here, "..", "lib", name)]


def _load():
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            lib = ctypes.CDLL(os.path.abspath(path))
            break
        tried.append(path)
    else:
        raise Error(_errno.ENOENT, "could not find librover-trainer.so (set ROVER_TRAINER_LIB; tried %s)"
                    % ", ".join(tried))
    P, I, I64, U64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_uint64
    E = ctypes.POINTER(_Err)
    sig = {
        "rv_trainer_open": (P, [E]),
        "rv_trainer_open_opts": (P, [ctypes.POINTER(_Opts), E]),
        "rv_trainer_close": (None, [P]),
        "rv_trainer_last_error": (ctypes.c_char_p, [P]),
        "rv_trainer_rank": (I, [P]),
        "rv_trainer_world_size": (I, [P]),
        "rv_trainer_next": (I, [P, ctypes.POINTER(_Shard), E]),
        "rv_trainer_consumed": (I, [P, I64]),
        "rv_trainer_done": (I, [P, E]),
        "rv_trainer_report_step": (I, [P, I64, I64, E]),
        "rv_trainer_report_step_compute": (I, [P, I64, I64, ctypes.c_double, E]),
        "rv_trainer_flush": (I, [P, I, E]),
        "rv_trainer_reserve": (I, [P, U64, E]),
        "rv_trainer_save": (I, [P, I64, ctypes.POINTER(P), ctypes.POINTER(U64), I,
                                ctypes.POINTER(_Stats), E]),
        "rv_trainer_load": (I, [P, ctypes.POINTER(I64), ctypes.POINTER(I), E]),
        "rv_trainer_loaded": (I, [P, I, ctypes.POINTER(P), ctypes.POINTER(U64)]),
        "rv_trainer_loaded_position": (I, [P, ctypes.POINTER(I64), ctypes.POINTER(I64)]),
        "rv_trainer_load_step": (I, [P, I64, ctypes.POINTER(I64), ctypes.POINTER(I), E]),
        "rv_trainer_steps": (I, [P, ctypes.POINTER(I64), I, E]),
        "rv_trainer_loaded_from": (I, [P, ctypes.POINTER(I)]),
        "rv_trainer_restore_data": (I, [P, I64, E]),
        "rv_trainer_position": (None, [P, ctypes.POINTER(I64), ctypes.POINTER(I64)]),
        "rv_trainer_save_at": (I, [P, I64, I64, I64, ctypes.POINTER(P), ctypes.POINTER(U64), I,
                                   ctypes.POINTER(_Stats), E]),
        "rv_trainer_save_start": (I, [P, I64, ctypes.POINTER(P), ctypes.POINTER(U64), I, E]),
        "rv_trainer_save_wait": (I, [P, ctypes.POINTER(_Stats)]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


def _raise(rc, err):
    msg = err.msg.decode(errors="replace") if err.msg else os.strerror(-rc)
    raise Error(-rc, msg)


def _b(s):
    return s.encode() if isinstance(s, str) else s


class Trainer:
    """One process's handle (rv_trainer): from rover-run's variables, or from
    explicit arguments (master=None: checkpoints only)."""

    def __init__(self, master=None, node="", job=None, rank=None, world_size=None, local_rank=0,
                 dataset=None, from_env=None):
        lib = _load()
        err = _Err()
        if from_env is None:
            from_env = rank is None
        if from_env:
            h = lib.rv_trainer_open(ctypes.byref(err))
        else:
            o = _Opts(_b(master), _b(node), _b(job), _b(dataset), rank, local_rank,
                      world_size or 1, 0)
            h = lib.rv_trainer_open_opts(ctypes.byref(o), ctypes.byref(err))
        if not h:
            _raise(err.code, err)
        self._lib, self._h, self._pid = lib, h, os.getpid()

    def close(self):
        if self._h:
            self._lib.rv_trainer_close(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def rank(self):
        return self._lib.rv_trainer_rank(self._h)

    @property
    def world_size(self):
        return self._lib.rv_trainer_world_size(self._h)

    def _check(self, rc, err=None):
        if rc < 0:
            if err is None or not err.msg:
                err = _Err(rc, b"", self._lib.rv_trainer_last_error(self._h) or b"")
            _raise(rc, err)
        return rc

    def next_shard(self):
        """(status, shard): status SHARD with a dict, WAIT or FINISHED with None."""
        s, err = _Shard(), _Err()
        rc = self._check(self._lib.rv_trainer_next(self._h, ctypes.byref(s), ctypes.byref(err)), err)
        if rc != SHARD:
            return rc, None
        return rc, {"dataset": s.dataset.decode(), "id": s.id, "start": s.start, "end": s.end,
                    "epoch": s.epoch, "partition": s.partition.decode()}

    def consumed(self, n):
        self._check(self._lib.rv_trainer_consumed(self._h, n))

    def done(self):
        err = _Err()
        self._check(self._lib.rv_trainer_done(self._h, ctypes.byref(err)), err)

    def report_step(self, step, samples, compute_time=None):
        """Queued for the master (the step goes on); dropped, said on stderr
        (the first, then every 100th), while the queue is full."""
        err = _Err()
        rc = self._lib.rv_trainer_report_step_compute(
            self._h, step, samples, float(compute_time or 0), ctypes.byref(err))
        if rc == -_errno.ENOBUFS:
            self._dropped = getattr(self, "_dropped", 0) + 1
            if self._dropped % 100 == 1:
                print("rover: %s (%d so far)" % (err.msg.decode(errors="replace"), self._dropped),
                      file=sys.stderr, flush=True)
            return
        self._check(rc, err)

    def flush(self, timeout_s=10.0):
        """Wait for the queued dones, step reports and saves' positions to reach
        the master; raises when some still wait, or the master refused one."""
        err = _Err()
        self._check(self._lib.rv_trainer_flush(self._h, int(timeout_s * 1000), ctypes.byref(err)), err)

    def position(self):
        """The shard position a save would record now: (task_id, consumed)."""
        task, consumed = ctypes.c_int64(), ctypes.c_int64()
        self._lib.rv_trainer_position(self._h, ctypes.byref(task), ctypes.byref(consumed))
        return task.value, consumed.value

    def save(self, step, buffers, position=None):
        """Save step with buffers, a list of (address, nbytes), and the shard
        position (now, or position from position()); returns the stats
        (stall_s, copy_s, bytes, reported)."""
        n = len(buffers)
        ptrs = (ctypes.c_void_p * n)(*[a for a, _ in buffers])
        sizes = (ctypes.c_uint64 * n)(*[s for _, s in buffers])
        st, err = _Stats(), _Err()
        if position is None:
            rc = self._lib.rv_trainer_save(self._h, step, ptrs, sizes, n, ctypes.byref(st),
                                           ctypes.byref(err))
        else:
            rc = self._lib.rv_trainer_save_at(self._h, step, position[0], position[1], ptrs, sizes,
                                              n, ctypes.byref(st), ctypes.byref(err))
        self._check(rc, err)
        return self._stats(st)

    def _stats(self, st):
        """A save's stats as a dict; a position the master refused is said on
        stderr (the first time, then every 100th), with the reason."""
        out = {"stall_s": st.stall_s, "copy_s": st.copy_s, "bytes": st.bytes,
               "reported": bool(st.reported)}
        if st.report_failed:
            self._report_failures = getattr(self, "_report_failures", 0) + 1
            if self._report_failures % 100 == 1:
                why = (self._lib.rv_trainer_last_error(self._h) or b"").decode(errors="replace")
                print("rover: a checkpoint's data position did not reach the master (%d so far;"
                      " a restart cannot resume the data there): %s"
                      % (self._report_failures, why), file=sys.stderr, flush=True)
        return out

    def save_start(self, step, buffers):
        """Start saving step with buffers, a list of (address, nbytes), and the
        shard position now: a thread of the library copies and commits them
        while the caller goes on.  Their bytes must not change until
        save_wait() returns (the parameters: before the optimizer's step)."""
        n = len(buffers)
        ptrs = (ctypes.c_void_p * n)(*[a for a, _ in buffers])
        sizes = (ctypes.c_uint64 * n)(*[s for _, s in buffers])
        err = _Err()
        self._check(self._lib.rv_trainer_save_start(self._h, step, ptrs, sizes, n, ctypes.byref(err)),
                    err)

    def save_wait(self):
        """Wait for the save save_start() began: its stats as save() gives them
        (stall_s: how long save_start and save_wait blocked together), or None
        when none was in flight."""
        st = _Stats()
        if self._lib.rv_trainer_save_wait(self._h, ctypes.byref(st)) == 0:
            return None
        return self._stats(st)

    def steps(self):
        """The steps this rank could load, newest first (memory and storage)."""
        arr, err = (ctypes.c_int64 * 64)(), _Err()
        n = self._check(self._lib.rv_trainer_steps(self._h, arr, 64, ctypes.byref(err)), err)
        return list(arr[:n])

    def restore_data(self, step):
        """Put the master's data shards back where they were at step (one rank,
        before any rank takes a shard)."""
        err = _Err()
        self._check(self._lib.rv_trainer_restore_data(self._h, step, ctypes.byref(err)), err)

    def loaded_from(self):
        """("memory" or "storage", rank whose part) of the loaded checkpoint."""
        r = ctypes.c_int()
        rc = self._check(self._lib.rv_trainer_loaded_from(self._h, ctypes.byref(r)))
        return ("memory", "storage")[rc], r.value

    def load(self, step=None):
        """(step, [memoryview of each buffer], (task_id, consumed)) of the newest
        complete checkpoint (or of step), or None.  The views point into shared
        memory: copy them before the second save after this."""
        want = -1 if step is None else step
        step, nb, err = ctypes.c_int64(), ctypes.c_int(), _Err()
        rc = self._check(self._lib.rv_trainer_load_step(self._h, want, ctypes.byref(step),
                                                        ctypes.byref(nb), ctypes.byref(err)), err)
        if rc == 0:
            return None
        views = []
        for i in range(nb.value):
            p, size = ctypes.c_void_p(), ctypes.c_uint64()
            self._check(self._lib.rv_trainer_loaded(self._h, i, ctypes.byref(p), ctypes.byref(size)))
            views.append(memoryview((ctypes.c_char * size.value).from_address(p.value or 0))
                         if size.value else memoryview(b""))
        task, consumed = ctypes.c_int64(), ctypes.c_int64()
        self._lib.rv_trainer_loaded_position(self._h, ctypes.byref(task), ctypes.byref(consumed))
        return step.value, views, (task.value, consumed.value)


_default = None


def trainer():
    """This process's Trainer from rover-run's variables (opened once per process)."""
    global _default
    if _default is None or _default._pid != os.getpid():
        _default = Trainer()
        atexit.register(_close_at_exit, weakref.ref(_default))
    return _default


def _close_at_exit(ref):
    t = ref()
    if t is not None and t._pid == os.getpid() and t._h:
        try:
            t.flush()  # what is queued for the master is delivered (10 s at most)
        except Error as e:
            print("rover: %s" % e, file=sys.stderr, flush=True)


def report_step(step, samples, compute_time=None):
    """Tell the master that global step step was reached, samples trained since
    the last report; compute_time: seconds of this node's own work per step
    (ComputeTimer.take()), None when unknown."""
    trainer().report_step(step, samples, compute_time)


class ComputeTimer:
    """This node's own work per step under DistributedDataParallel: from the
    start of the wrapped module's forward to the moment its last gradient
    bucket is ready to be reduced.  DDP reduces buckets in order, so the last
    one is ready once backward has produced every gradient here; the
    all-reduces of the earlier buckets run in the background meanwhile and
    their waits on peers fall after that moment, as does DDP's own wait at
    the end of backward.  A comm hook marks it and then reduces the bucket
    as DDP does by default (allreduce, divided by the world size)."""

    def __init__(self, ddp, process_group=None):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        self._reduce = default_hooks.allreduce_hook
        self._t0 = None
        self._sum, self._n = 0.0, 0
        ddp.module.register_forward_pre_hook(self._start)
        ddp.register_comm_hook(process_group, self._hook)

    def _start(self, module, inputs):
        if self._t0 is None:  # the first forward of the step (accumulation)
            self._t0 = time.perf_counter()

    def _hook(self, state, bucket):
        if bucket.is_last() and self._t0 is not None:
            self._sum += time.perf_counter() - self._t0
            self._n += 1
            self._t0 = None
        return self._reduce(state, bucket)

    def take(self):
        """The mean compute time of the steps since the last take, None if none."""
        if not self._n:
            return None
        mean = self._sum / self._n
        self._sum, self._n = 0.0, 0
        return mean


try:
    import torch as _torch
    _Base = _torch.utils.data.IterableDataset
except ImportError:  # the sampler works without torch too
    _torch = None
    _Base = object


class ShardSampler(_Base):
    """Sample indices of the master's data shards, each exactly once across the
    job: an iterable for torch.utils.data.DataLoader (as its dataset, mapping
    indices to samples in a collate or a wrapping dataset) or a plain loop.  A
    shard is reported done once all its indices were taken and the next one is
    asked for; the position inside a shard goes with each checkpoint."""

    def __init__(self, trainer_=None, wait_s=0.01):
        self._t = trainer_
        self.wait_s = wait_s
        self.shard = None
        self._k = 0
        self.finished = False  # the master has no shard left

    def _advance(self, block):
        """The next index, or None (finished, or none free now and not block).
        An index handed out counts as consumed (a checkpoint taken after
        training on it resumes after it); a shard is done with its last."""
        t = self._t or trainer()
        while self.shard is None:
            if self.finished:
                return None
            status, shard = t.next_shard()
            if status == FINISHED:
                self.finished = True
                return None
            if status == WAIT:
                if not block:
                    return None
                time.sleep(self.wait_s)
                continue
            self.shard, self._k = shard, 0
        s = self.shard
        i = s["start"] + self._k
        self._k += 1
        t.consumed(self._k)
        if self._k == s["end"] - s["start"]:
            t.done()
            self.shard = None
        return i

    def __iter__(self):
        while True:
            i = self._advance(True)
            if i is None:
                return
            yield i

    def take(self, n):
        """Up to n indices without waiting: fewer when the master has none free
        now (the other ranks hold the rest) or none left (self.finished).  What
        a data parallel loop wants: a rank never blocks its peers' step."""
        out = []
        while len(out) < n:
            i = self._advance(False)
            if i is None:
                break
            out.append(i)
        return out


_TENSOR = "__rover_tensor__"


def _wait_before_step(opt, ref):
    """Make opt.step() wait for the overlapped save of the Checkpointer ref
    names first (an instance attribute wrapping the bound method: what
    torch's LR schedulers wrap in turn, on every torch version)."""
    step = opt.step

    def waiting_step(_opt, *args, **kwargs):
        ck = ref()
        if ck is not None:
            ck._settle()
        return step(*args, **kwargs)

    opt.step = types.MethodType(waiting_step, opt)


def _wait_at_exit(ref):
    ck = ref()
    if ck is not None:
        ck._settle()  # the last save is committed before the process ends


class Checkpointer:
    """Flash checkpoints of a model's and an optimizer's state_dict: the tensors'
    bytes are copied into this rank's shared memory (no pickling of tensors; a
    small pickled header says each one's dtype and shape and holds the other
    values), so save() costs about one memcpy of the state; load() restores the
    newest complete copy bit for bit.

    With an optimizer and overlap=True, a save of CPU tensors overlaps the next
    step (off by default: the loop must keep the rule below, which a plain
    save does not ask): save() reports the step's data position to the
    master and returns; a thread of the library copies the
    parameters and the optimizer's state while the next forward and backward
    run; optimizer.step() (wrapped for it) first waits for what is left of the
    copy, so the checkpoint holds the state of the step saved.  Other tensors
    (buffers such as BatchNorm's running statistics, which a forward writes)
    are copied in save() itself.  Nothing but the optimizer may write the
    parameters between save() and the next optimizer.step() or wait()."""

    def __init__(self, model, optimizer=None, trainer_=None, overlap=False, extra=None):
        if _torch is None:
            raise Error(_errno.ENOSYS, "rover.Checkpointer needs torch")
        self.model, self.optimizer, self._t = model, optimizer, trainer_
        self.extra = extra  # saved and loaded too: its state_dict(), load_state_dict()
        self.overlap = bool(overlap) and optimizer is not None
        self.last = None  # the stats of the last save
        self.source = None  # ("memory" or "storage", rank) of the last load
        self.data_restored = False  # the last load put the data shards back
        self._pinned, self._stream, self._pending, self._error = {}, None, None, None
        self._inflight = None  # (trainer, tensors, header) an overlapped save reads
        self._staged = {}  # copies of the tensors a forward may write, by index
        if self.overlap:
            _wait_before_step(optimizer, weakref.ref(self))
            atexit.register(_wait_at_exit, weakref.ref(self))

    def __del__(self):
        try:
            self._settle()  # the library's thread may still read the tensors
        except Exception:
            pass

    def _state(self):
        st = {"model": self.model.state_dict()}
        if self.optimizer is not None:
            st["optimizer"] = self.optimizer.state_dict()
        if self.extra is not None:
            st["extra"] = self.extra.state_dict()
        return st

    def _read_later(self):
        """The data_ptr of each tensor only optimizer.step() writes: the
        parameters and the optimizer's state."""
        ptrs = {p.data_ptr() for p in self.model.parameters()}
        for st in self.optimizer.state.values():
            ptrs.update(v.data_ptr() for v in st.values() if isinstance(v, _torch.Tensor))
        return ptrs

    def _stage(self, i, t):
        """A copy of CPU tensor t (the i-th saved), in memory kept between
        saves: fresh pages cost a fault each, more than the copy."""
        buf = self._staged.get(i)
        if buf is None or buf.shape != t.shape or buf.dtype != t.dtype:
            buf = _torch.empty_like(t, memory_format=_torch.contiguous_format)
            self._staged[i] = buf
        return buf.copy_(t)

    def save(self, step):
        """Copy the state of step into this rank's shared memory.  CPU tensors:
        with overlap, starts the copy and returns None (the next
        optimizer.step() or wait() waits for it, self.last then holds its
        stats); else returns once the copy is committed (the stats).  GPU
        tensors: copied on a side stream into pinned host buffers (kept between
        saves), the default stream waiting for that copy on the GPU, not the
        host; a thread then commits them while the loop goes on, so the next
        save (or load, or wait()) waits for it; returns None."""
        self.wait()
        tensors = []
        later = self._read_later() if self.overlap else set()

        def strip(v):
            if isinstance(v, _torch.Tensor):
                t = v.detach()
                if not t.is_contiguous():
                    t = t.contiguous()  # a copy already
                elif later and not t.is_cuda and t.data_ptr() not in later:
                    t = self._stage(len(tensors), t)  # the next forward may write it
                tensors.append(t)
                return (_TENSOR, len(tensors) - 1)
            if isinstance(v, dict):
                return type(v)((k, strip(x)) for k, x in v.items())
            if isinstance(v, (list, tuple)):
                return type(v)(strip(x) for x in v)
            return v

        tree = strip(self._state())
        meta = [(str(t.dtype).replace("torch.", ""), tuple(t.shape)) for t in tensors]
        header = pickle.dumps({"version": 1, "tree": tree, "tensors": meta}, protocol=4)
        hbuf = ctypes.create_string_buffer(header, len(header))
        tr = self._t or trainer()
        if not any(t.is_cuda for t in tensors):
            bufs = [(ctypes.addressof(hbuf), len(header))]
            bufs += [(t.data_ptr(), t.numel() * t.element_size()) for t in tensors]
            if self.overlap:
                tr.save_start(step, bufs)
                self._inflight = (tr, tensors, hbuf)
                return None
            self.last = tr.save(step, bufs)
            return self.last
        # GPU (untested where no GPU was at hand): stage through pinned memory
        if self._stream is None:
            self._stream = _torch.cuda.Stream()
        cur = _torch.cuda.current_stream()
        self._stream.wait_stream(cur)
        host = []
        with _torch.cuda.stream(self._stream):
            for i, t in enumerate(tensors):
                if not t.is_cuda:
                    host.append(t)
                    continue
                buf = self._pinned.get(i)
                if buf is None or buf.shape != t.shape or buf.dtype != t.dtype:
                    buf = _torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                    self._pinned[i] = buf
                buf.copy_(t, non_blocking=True)
                t.record_stream(self._stream)
                host.append(buf)
        done = _torch.cuda.Event()
        done.record(self._stream)
        cur.wait_event(done)  # the next step's kernels run after the copy, on the GPU
        position = tr.position()  # the data of this step, not of the next

        def finish():
            try:
                done.synchronize()
                bufs = [(ctypes.addressof(hbuf), len(header))]
                bufs += [(t.data_ptr(), t.numel() * t.element_size()) for t in host]
                self.last = tr.save(step, bufs, position)
            except BaseException as e:  # raised by the next wait()
                self._error = e

        self._pending = threading.Thread(target=finish, name="rover-save", daemon=True)
        self._pending.start()
        return None

    def _settle(self):
        """Wait for an overlapped CPU save (what optimizer.step() waits for)."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            self.last = inflight[0].save_wait() or self.last

    def wait(self):
        """Wait for a save still being copied or committed (an overlapped CPU
        save, a GPU save's commit); raises its error."""
        self._settle()
        p, self._pending = self._pending, None
        if p is not None:
            p.join()
        e, self._error = self._error, None
        if e is not None:
            raise e

    def _choose(self, t):
        """The step to load, agreed by every rank: the newest step any rank
        holds whose data shards rank 0 can put back (it imports the master's
        data checkpoint of that step, before any rank takes a shard), else
        the newest step every rank holds.  (chosen, restored, src): src is
        the rank that sends the checkpoint to the ranks that do not hold it
        (a node that came back after the others trained on, a new node on
        another machine), -1 when every rank holds it.  The state is taken
        to be replicated, as data parallel training keeps it."""
        steps = t.steps()
        dist = _torch.distributed
        on = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        every = [steps]
        if on:
            every = [None] * dist.get_world_size()
            dist.all_gather_object(every, steps)
        common = set(every[0])
        for s in every[1:]:
            common &= set(s)
        common = sorted(common, reverse=True)
        anywhere = sorted(set().union(*every), reverse=True)
        chosen, restored = None, False
        if not on or dist.get_rank() == 0:
            for s in anywhere:
                try:
                    t.restore_data(s)
                    chosen, restored = s, True
                    break
                except Error as e:
                    if e.errno == _errno.ENOTCONN:
                        break
            if chosen is None:
                chosen = common[0] if common else (anywhere[0] if anywhere else None)
        if on:
            box = [chosen, restored]
            dist.broadcast_object_list(box, src=0)
            chosen, restored = box
        holders = [r for r, st in enumerate(every) if chosen in st]
        src = holders[0] if chosen is not None and len(holders) < len(every) else -1
        return chosen, restored, src

    def _share(self, t, chosen, src):
        """Rank src loads chosen and sends its buffers to every rank; the
        others receive them: (step, views, position) as Trainer.load gives."""
        dist = _torch.distributed
        rank = dist.get_rank()
        got = t.load(chosen) if rank == src else None
        box = [[len(v) for v in got[1]] if got else None]
        dist.broadcast_object_list(box, src=src)
        if box[0] is None:
            return None  # no longer loadable: every rank raises
        dev = "cuda" if dist.get_backend() == "nccl" else "cpu"
        views = []
        for i, n in enumerate(box[0]):
            if rank == src:
                buf = _torch.frombuffer(bytearray(got[1][i]), dtype=_torch.uint8) if n else None
            else:
                buf = _torch.empty(n, dtype=_torch.uint8)
            if n:
                moved = buf.to(dev)
                dist.broadcast(moved, src=src)
                buf = moved.cpu()
            views.append(memoryview(buf.numpy()) if n else memoryview(bytearray()))
        if rank == src:
            return got
        return chosen, views, (0, 0)

    def load(self):
        """Restore the newest complete checkpoint (from memory, else from
        rover-run's storage) and put the data shards back at its step; its
        step, or None.  With torch.distributed initialized, every rank calls it
        (it agrees on the step), before iterating a ShardSampler; a rank that
        does not hold that step receives it from one that does (source
        ("peer", rank)), so a node that comes back, or a new one on another
        machine, joins the others where they are."""
        t = self._t or trainer()
        self.wait()
        chosen, self.data_restored, src = self._choose(t)
        if chosen is None:
            return None
        got = t.load(chosen) if src < 0 else self._share(t, chosen, src)
        if got is None:
            raise Error(_errno.EIO, "checkpoint of step %d is no longer loadable" % chosen)
        here = src < 0 or _torch.distributed.get_rank() == src
        self.source = t.loaded_from() if here else ("peer", src)
        step, views, self.position = got
        head = pickle.loads(bytes(views[0]))
        tensors = [_tensor_on(dtype, shape, view)
                   for (dtype, shape), view in zip(head["tensors"], views[1:])]

        def fill(v, own):
            if isinstance(v, tuple) and len(v) == 2 and v[0] == _TENSOR:
                return tensors[v[1]].clone() if own else tensors[v[1]]
            if isinstance(v, dict):
                return type(v)((k, fill(x, own)) for k, x in v.items())
            if isinstance(v, (list, tuple)):
                return type(v)(fill(x, own) for x in v)
            return v

        # The tensors lie on the checkpoint's memory, which a later save
        # overwrites: a torch module copies them into its own (as an
        # optimizer deep-copies them), anything else gets copies of its own.
        # Fresh pages cost a fault each, more than the copy, so a restart
        # copies the state once, not twice.
        tree = head["tree"]
        self.model.load_state_dict(fill(tree["model"], not isinstance(self.model, _torch.nn.Module)))
        if self.optimizer is not None and "optimizer" in tree:
            own = not isinstance(self.optimizer, _torch.optim.Optimizer)
            self.optimizer.load_state_dict(fill(tree["optimizer"], own))
        if self.extra is not None and "extra" in tree:
            self.extra.load_state_dict(fill(tree["extra"], True))
        return step


def _tensor_on(dtype, shape, view):
    """A tensor of dtype and shape on view's bytes (no copy)."""
    dt = getattr(_torch, dtype)
    n = _torch.empty(0, dtype=dt).element_size()
    for d in shape:
        n *= d
    if n != len(view):
        raise Error(_errno.EINVAL, "checkpoint tensor of %d bytes, expected %d" % (len(view), n))
    if not n:
        return _torch.empty(shape, dtype=dt)
    with _warnings.catch_warnings():  # a read-only mapping: never written through
        _warnings.simplefilter("ignore")
        return _torch.frombuffer(view, dtype=_torch.uint8).view(dt).reshape(shape)


from rover.stream import Record, RedisStream, StreamSampler  # noqa: E402  (redis on first use)
