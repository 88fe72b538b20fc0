"""rover: data shards, step reports and flash checkpoints for a training
script run by rover-run, over librover-trainer (ctypes, no build needed).

    import rover, torch
    sampler = rover.ShardSampler()             # sample indices from the master
    ckpt = rover.Checkpointer(model, optimizer)
    step = ckpt.load() or 0                    # newest complete copy, or None
    for step, i in enumerate(sampler, start=step + 1):
        loss = model(data[i]).sum(); loss.backward(); optimizer.step()
        rover.report_step(step, 1)
        ckpt.save(step)                        # a copy in shared memory, returns

The library is found through $ROVER_TRAINER_LIB, else next to the package
(<prefix>/lib/librover-trainer.so for python/rover or lib/python/rover, and
build/lib/ in a source tree).  Errors raise rover.Error (an OSError with the
errno and the library's message).
"""
import ctypes
import errno as _errno
import os
import pickle
import time

__all__ = ["Error", "Trainer", "ShardSampler", "Checkpointer", "report_step", "trainer"]

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
                ("end", ctypes.c_int64), ("epoch", ctypes.c_int32)]


class _Stats(ctypes.Structure):
    _fields_ = [("stall_s", ctypes.c_double), ("copy_s", ctypes.c_double), ("bytes", ctypes.c_uint64),
                ("slot", ctypes.c_int), ("reported", ctypes.c_int)]


_lib = None


def _candidates():
    env = os.environ.get("ROVER_TRAINER_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    name = "librover-trainer.so"
    return [os.path.join(here, name),
            os.path.join(here, "..", "..", "lib", name),        # <prefix>/lib/python/rover
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
        "rv_trainer_reserve": (I, [P, U64, E]),
        "rv_trainer_save": (I, [P, I64, ctypes.POINTER(P), ctypes.POINTER(U64), I,
                                ctypes.POINTER(_Stats), E]),
        "rv_trainer_load": (I, [P, ctypes.POINTER(I64), ctypes.POINTER(I), E]),
        "rv_trainer_loaded": (I, [P, I, ctypes.POINTER(P), ctypes.POINTER(U64)]),
        "rv_trainer_loaded_position": (I, [P, ctypes.POINTER(I64), ctypes.POINTER(I64)]),
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
                    "epoch": s.epoch}

    def consumed(self, n):
        self._check(self._lib.rv_trainer_consumed(self._h, n))

    def done(self):
        err = _Err()
        self._check(self._lib.rv_trainer_done(self._h, ctypes.byref(err)), err)

    def report_step(self, step, samples):
        err = _Err()
        self._check(self._lib.rv_trainer_report_step(self._h, step, samples, ctypes.byref(err)), err)

    def save(self, step, buffers):
        """Save step with buffers, a list of (address, nbytes); returns the stats
        (stall_s, copy_s, bytes, reported)."""
        n = len(buffers)
        ptrs = (ctypes.c_void_p * n)(*[a for a, _ in buffers])
        sizes = (ctypes.c_uint64 * n)(*[s for _, s in buffers])
        st, err = _Stats(), _Err()
        self._check(self._lib.rv_trainer_save(self._h, step, ptrs, sizes, n, ctypes.byref(st),
                                              ctypes.byref(err)), err)
        return {"stall_s": st.stall_s, "copy_s": st.copy_s, "bytes": st.bytes,
                "reported": bool(st.reported)}

    def load(self):
        """(step, [memoryview of each buffer], (task_id, consumed)) of the newest
        complete checkpoint, or None.  The views point into shared memory: copy
        them before the second save after this."""
        step, nb, err = ctypes.c_int64(), ctypes.c_int(), _Err()
        rc = self._check(self._lib.rv_trainer_load(self._h, ctypes.byref(step), ctypes.byref(nb),
                                                   ctypes.byref(err)), err)
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
    return _default


def report_step(step, samples):
    """Tell the master that global step step was reached, samples trained since
    the last report."""
    trainer().report_step(step, samples)


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

    def __iter__(self):
        t = self._t or trainer()
        while True:
            status, shard = t.next_shard()
            if status == FINISHED:
                return
            if status == WAIT:
                time.sleep(self.wait_s)
                continue
            self.shard = shard
            for k, i in enumerate(range(shard["start"], shard["end"])):
                t.consumed(k)
                yield i
            t.consumed(shard["end"] - shard["start"])
            t.done()
            self.shard = None


_TENSOR = "__rover_tensor__"


class Checkpointer:
    """Flash checkpoints of a model's and an optimizer's state_dict: the tensors'
    bytes are copied into this rank's shared memory (no pickling of tensors; a
    small pickled header says each one's dtype and shape and holds the other
    values), so save() costs about one memcpy of the state; load() restores the
    newest complete copy bit for bit."""

    def __init__(self, model, optimizer=None, trainer_=None):
        if _torch is None:
            raise Error(_errno.ENOSYS, "rover.Checkpointer needs torch")
        self.model, self.optimizer, self._t = model, optimizer, trainer_
        self.last = None  # the stats of the last save

    def _state(self):
        st = {"model": self.model.state_dict()}
        if self.optimizer is not None:
            st["optimizer"] = self.optimizer.state_dict()
        return st

    def save(self, step):
        tensors = []

        def strip(v):
            if isinstance(v, _torch.Tensor):
                t = v.detach()
                if t.device.type != "cpu":
                    t = t.cpu()
                t = t.contiguous()
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
        bufs = [(ctypes.addressof(hbuf), len(header))]
        bufs += [(t.data_ptr(), t.numel() * t.element_size()) for t in tensors]
        self.last = (self._t or trainer()).save(step, bufs)
        return self.last

    def load(self):
        """Restore the newest complete checkpoint; its step, or None."""
        got = (self._t or trainer()).load()
        if got is None:
            return None
        step, views, self.position = got
        head = pickle.loads(bytes(views[0]))
        tensors = []
        for (dtype, shape), view in zip(head["tensors"], views[1:]):
            t = _torch.empty(shape, dtype=getattr(_torch, dtype))
            n = t.numel() * t.element_size()
            if n != len(view):
                raise Error(_errno.EINVAL, "checkpoint tensor of %d bytes, expected %d" % (len(view), n))
            if n:
                ctypes.memmove(t.data_ptr(), ctypes.addressof(ctypes.c_char.from_buffer(view)), n)
            tensors.append(t)

        def fill(v):
            if isinstance(v, tuple) and len(v) == 2 and v[0] == _TENSOR:
                return tensors[v[1]]
            if isinstance(v, dict):
                return type(v)((k, fill(x)) for k, x in v.items())
            if isinstance(v, (list, tuple)):
                return type(v)(fill(x) for x in v)
            return v

        tree = fill(head["tree"])
        self.model.load_state_dict(tree["model"])
        if self.optimizer is not None and "optimizer" in tree:
            self.optimizer.load_state_dict(tree["optimizer"])
        return step
