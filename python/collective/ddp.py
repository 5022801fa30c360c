"""PyTorch DistributedDataParallel integration: gradient buckets reduced by collectived.

A DDP script keeps its model, loop and optimizer; it creates a communicator, lets it set up
the process group, and registers the hook::

    comm = collective.Communicator()
    collective.ddp.init_process_group(comm)          # gloo, for DDP's parameter broadcast
    model = DDP(net)
    model.register_comm_hook(collective.ddp.AllreduceState(comm), collective.ddp.allreduce_hook)

:func:`register` does the last line, and with COLL_TIMELINE set it also puts the model's
forward and backward passes on the rank's timeline (the "step" row, as coll-train's), beside the
buckets' allreduces.

DDP still needs a process group (it broadcasts the initial parameters and buffers with it and
checks the model is the same on every rank); :func:`init_process_group` creates a gloo one
without torchrun's MASTER_ADDR/MASTER_PORT. With the hook registered, every gradient bucket
goes through collectived instead of that process group.

Importing this module imports torch.
"""

import collections
import datetime
import hashlib
import os
import threading
import time

import torch
import torch.distributed as dist

# Bucket keys follow the layout of libcollective's own keys (coll__space_key(),
# client/api/api.h), within the 27 key bits a collective's tag carries (collective.h): key
# space in bits 24-26, iteration (mod 2**8) in bits 16-23, bucket index in bits 0-15. The hook uses key space 7; a C bucketer
# or explicit keys on the same communicator must stay out of it.
KEY_SPACE = 7
MAX_BUCKETS = 1 << 16
_ITER_MASK = (1 << 8) - 1

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class AllreduceState:
    """The state of :func:`allreduce_hook`: the communicator and one pool buffer per bucket.

    Args:
        comm (collective.Communicator): the rank's communicator.
        timeout (float | None): seconds a bucket's allreduce may take before the hook's future
            fails with COLL_ERR_TIMEDOUT (so a hung job raises in DDP instead of hanging);
            None waits forever.
        compression (str | callable | None): how buckets travel between nodes: a spec as
            :meth:`collective.Communicator.set_compression` takes (``"topk:0.01"``,
            ``"powersgd:2"``, ``"auto"``, ...), a callable that returns one for a
            ``dist.GradBucket`` (a per-bucket choice; every rank must choose alike), or None
            for the communicator's default (COLL_COMPRESSION). Bucket i keeps its residual in
            the daemons under bucket id i; with PowerSGD or auto the hook registers each
            bucket's tensor shapes once per layout.

    Pool buffers are cached by bucket index and reused every iteration; a bucket whose size or
    dtype changes (DDP rebuilds its buckets after the first iteration) gets a new one and the
    old one is freed. Statistics: ``iterations`` (backward passes whose last bucket was
    submitted), ``buckets`` (buckets in the latest one), ``calls`` (buckets reduced), ``bytes``
    (their total size), ``algos`` (a Counter of the algorithms that ran them), ``comm_ns``
    (summed submit-to-completion time of the buckets, in nanoseconds), ``wire_bytes`` and
    ``dense_bytes`` (what this node sent to other nodes, and what the uncompressed ring
    would have: their quotient is the compression ratio).

    Thread-safety: the hook runs on DDP's autograd thread, completions on the communicator's
    progress thread; the statistics are updated under a lock.
    """

    def __init__(self, comm, timeout=300.0, compression=None):
        self.comm = comm
        self.timeout = timeout
        self.compression = compression
        self.calls = 0
        self.bytes = 0
        self.wire_bytes = 0
        self.dense_bytes = 0
        self._layouts = set()
        self.comm_ns = 0
        self.algos = collections.Counter()
        self.iterations = 0
        self.buckets = 0
        self._buffers = {}
        self._lock = threading.Lock()
        self.spans = None  # StepSpans, when register() put the passes on the timeline

    def __getstate__(self):
        raise TypeError("AllreduceState holds a communicator and cannot be pickled")

    def pool_buffer(self, index, like):
        """The pool tensor of bucket @index, shaped and typed as @like (1-D); allocated on
        first use and when @like's size or dtype changed."""
        buf = self._buffers.get(index)
        if buf is None or buf.numel() != like.numel() or buf.dtype != like.dtype:
            if buf is not None:
                self.comm.free(buf)
            buf = self.comm.empty_tensor(like.numel(), like.dtype)
            self._buffers[index] = buf
        return buf

    def next_key(self, bucket):
        """The operation key of @bucket in the current iteration (the same on every rank)."""
        index = bucket.index()
        if index >= MAX_BUCKETS:
            raise ValueError("bucket index %d >= %d: use a larger bucket_cap_mb"
                             % (index, MAX_BUCKETS))
        key = KEY_SPACE << 24 | (self.iterations & _ITER_MASK) << 16 | index
        if bucket.is_last():
            self.iterations += 1
            self.buckets = index + 1
        return key

    def compression_of(self, bucket):
        """The spec of @bucket (the communicator's default when none is given: explicit, so
        that the bucket keeps its own residual); registers its shapes with
        the daemon the first time PowerSGD or auto may need them."""
        spec = self.compression(bucket) if callable(self.compression) else self.compression
        spec = spec if spec is not None else self.comm.compression
        layout = bucket_layout(bucket)
        if spec.split(",")[0].split(":")[0] in ("powersgd", "auto") \
                and layout not in self._layouts:
            self.comm.register_layout(layout, bucket_shapes(bucket))
            self._layouts.add(layout)
        return spec

    def _record(self, future, nbytes):
        with self._lock:
            self.calls += 1
            self.bytes += nbytes
            self.wire_bytes += future.wire_bytes
            self.dense_bytes += future.dense_bytes
            self.algos[future.algo] += 1
            if future.timing is not None:
                self.comm_ns += future.timing.complete_ns - future.timing.submit_ns


def bucket_layout(bucket):
    """A 64-bit fingerprint of @bucket's parameters (shapes and dtypes in order, BLAKE2b), which
    the daemons compare across ranks: ranks whose DDP buckets hold different parameters fail
    with a mismatch instead of averaging unrelated gradients."""
    h = hashlib.blake2b(digest_size=8)
    for p in bucket.parameters():
        h.update(("%s %s;" % (tuple(p.shape), p.dtype)).encode())
    return int.from_bytes(h.digest(), "little") or 1


def bucket_shapes(bucket):
    """The (rows, cols) of every parameter of @bucket as PowerSGD sees it: (d0, d1*...) for a
    tensor (d0, d1, ...), (n, 1) for a vector, (1, 1) for a scalar; empty tensors left out."""
    shapes = []
    for p in bucket.parameters():
        n = p.numel()
        if n > 0:
            rows = p.shape[0] if p.dim() > 0 else 1
            shapes.append((rows, n // rows))
    return shapes


class StepSpans:
    """The forward and backward passes of a DDP model as spans of the communicator's timeline
    ("forward" and "backward" on the "step" row, as coll-train draws them): forward from the
    model's forward pre-hook to its forward hook; backward from when autograd computes the
    gradient of the model's output (the backward pass reaches the model) to the hook of the
    iteration's last bucket (every gradient computed; what follows is the allreduces' wait).
    A forward without gradients (evaluation) adds a forward span only."""

    def __init__(self, comm, model):
        self.comm = comm
        self._forward = self._backward = None
        model.register_forward_pre_hook(self._forward_begins)
        model.register_forward_hook(self._forward_ends)

    def _forward_begins(self, module, inputs):
        self._forward = time.monotonic_ns()

    def _forward_ends(self, module, inputs, output):
        now = time.monotonic_ns()
        if self._forward is not None:
            self.comm.timeline_span("step", "forward", self._forward, now)
            self._forward = None
        tensors = output if isinstance(output, (list, tuple)) else [output]
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(self._backward_begins)
                return

    def _backward_begins(self, grad):
        if self._backward is None:
            self._backward = time.monotonic_ns()

    def backward_done(self):
        """The iteration's last bucket is ready: the backward span ends now."""
        if self._backward is not None:
            self.comm.timeline_span("step", "backward", self._backward, time.monotonic_ns())
            self._backward = None


def allreduce_hook(state, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: average @bucket over all ranks through collectived.

    Register with ``ddp_model.register_comm_hook(AllreduceState(comm), allreduce_hook)``.
    The bucket (a flat CPU tensor) is copied into the bucket's pool buffer and reduced there
    with COLL_AVG asynchronously; the returned future completes, on the communicator's
    progress thread, once the average is copied back into the bucket tensor, and its value is
    that tensor. The autograd thread does not wait: DDP waits on the future before the
    optimizer step. Failures (a mismatch, a lost peer, the timeout) complete the future with
    a :class:`collective.CollectiveError`, which DDP raises from ``backward()``.
    """
    grads = bucket.buffer()
    if state.spans is not None and bucket.is_last():
        state.spans.backward_done()
    pool = state.pool_buffer(bucket.index(), grads)
    pool.copy_(grads)
    fut = state.comm.allreduce(pool, op="avg", key=state.next_key(bucket),
                               timeout=state.timeout, layout=bucket_layout(bucket),
                               compression=state.compression_of(bucket), bucket=bucket.index())

    def copy_back(result):
        grads.copy_(result)
        state._record(fut, grads.numel() * grads.element_size())
        return grads

    return fut.as_torch_future(copy_back)


def register(ddp_model, comm, timeout=300.0, compression=None):
    """Register :func:`allreduce_hook` on @ddp_model with a new :class:`AllreduceState` of
    @comm (and @compression, as there), and return the state. When @comm writes a timeline
    (COLL_TIMELINE), the model's passes go on it too (:class:`StepSpans`)."""
    state = AllreduceState(comm, timeout, compression)
    if comm.timeline_enabled:
        state.spans = StepSpans(comm, ddp_model)
    ddp_model.register_comm_hook(state, allreduce_hook)
    return state


def _root_host():
    """The host part of COLL_ROOT (node 0's daemon), or None."""
    root = os.environ.get("COLL_ROOT", "")
    host, sep, _ = root.rpartition(":")
    if not sep or not host:
        return None
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _store_via_collective(comm, host, timeout):
    """A TCPStore that rank 0 opens on a free port, which it broadcasts through @comm."""
    port = comm.zeros(1, "int64")
    if comm.rank == 0:
        store = dist.TCPStore(host, 0, comm.world_size, True, timeout, wait_for_workers=False)
        port[0] = store.port
    comm.broadcast(port, root=0).result(timeout.total_seconds())
    if comm.rank != 0:
        store = dist.TCPStore(host, int(port[0]), comm.world_size, False, timeout)
    comm.free(port)
    return store


def init_process_group(comm, backend="gloo", timeout=300.0):
    """Initialize ``torch.distributed`` with @comm's rank and world size (the default
    process group DDP needs for its parameter broadcast).

    The rendezvous store: MASTER_ADDR:MASTER_PORT when MASTER_PORT is set (torchrun's
    convention); otherwise rank 0 opens a TCPStore on a free port of MASTER_ADDR, else of
    COLL_ROOT's host (node 0), else 127.0.0.1, and sends the port to the other ranks with a
    collectived broadcast. When that host is a loopback address, GLOO_SOCKET_IFNAME defaults
    to ``lo``. @timeout: seconds for the store and the process group. Blocks until every rank
    has joined; raises RuntimeError (torch) or CollectiveError on failure.
    """
    host = os.environ.get("MASTER_ADDR") or _root_host() or "127.0.0.1"
    if host in LOOPBACK_HOSTS and backend == "gloo":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    td = datetime.timedelta(seconds=timeout)
    if os.environ.get("MASTER_PORT"):
        store = dist.TCPStore(host, int(os.environ["MASTER_PORT"]), comm.world_size,
                              comm.rank == 0, td)
    else:
        store = _store_via_collective(comm, host, td)
    dist.init_process_group(backend, store=store, rank=comm.rank, world_size=comm.world_size,
                            timeout=td)
