"""The communicator: one rank's membership in a collectived job."""

import ctypes
import operator
import os
import weakref

from . import _lib
from .errors import make_error
from .pool import Native, numpy_array, torch_tensor
from .progress import Future, Progress
from .timeline import Span, Timeline
from .types import address, buffer_info, is_tensor, parse_algo, parse_op

def parse_compression(lib, spec):
    """The coll_compression_t of the text @spec (coll_compression_parse()); ValueError when
    malformed."""
    c = _lib.Compression()
    if not isinstance(spec, str) or lib.coll_compression_parse(spec.encode(),
                                                                ctypes.byref(c)) != 0:
        raise ValueError("compression %r: use none, fp16, bf16, topk:RATIO, onebit, "
                         "powersgd:RANK or auto, optionally with ,noef and ,warmup=N" % (spec,))
    return c


def _params(socket, job, rank, world_size, local_rank, local_size, root, timeout, pool_size,
            job_token, connect_timeout=None):
    """A coll_comm_params_t with the fields that were given; the rest come from COLL_*."""
    p = _lib.CommParams()
    if socket is not None:
        p.field_mask |= _lib.PARAM_SOCKET
        p.socket_path = os.fsencode(socket)
    if job is not None:
        p.field_mask |= _lib.PARAM_JOB
        p.job = job.encode()
    if (rank is None) != (world_size is None):
        raise ValueError("give rank and world_size together (or neither, for COLL_RANK and "
                         "COLL_WORLD_SIZE)")
    if rank is not None:
        p.field_mask |= _lib.PARAM_RANK
        p.rank, p.world_size = rank, world_size
    if (local_rank is None) != (local_size is None):
        raise ValueError("give local_rank and local_size together (or neither)")
    if local_rank is not None:
        p.field_mask |= _lib.PARAM_LOCAL_RANK
        p.local_rank, p.local_size = local_rank, local_size
    if root is not None:
        p.field_mask |= _lib.PARAM_ROOT
        p.root = root.encode()
    if timeout is not None:
        p.field_mask |= _lib.PARAM_TIMEOUT
        p.timeout_ms = max(1, int(timeout * 1000))
    if pool_size is not None:
        p.field_mask |= _lib.PARAM_POOL_SIZE
        p.pool_bytes = int(pool_size)
    if job_token is not None:
        p.field_mask |= _lib.PARAM_TOKEN
        p.job_token = job_token.encode() if isinstance(job_token, str) else bytes(job_token)
    if connect_timeout is not None:
        p.field_mask |= _lib.PARAM_CONNECT_TIMEOUT
        p.connect_timeout_ms = max(0, int(connect_timeout * 1000))
    return p


class Communicator:
    """One rank of a collectived job: pool memory and asynchronous collectives.

    ``Communicator()`` connects to the node's daemon and joins the job described by the COLL_*
    environment variables (as ``collective-launch``, Slurm's ``coll-env.sh`` or torchrun set
    them); keyword arguments override single fields. Construction blocks until every rank of
    the job has joined (the rendezvous), at most the job's timeout, and raises
    :class:`~collective.CollectiveError` on failure (e.g. COLL_ERR_CONNREFUSED when no daemon
    listens within the connect timeout, a daemon that is starting being waited for;
    COLL_ERR_RENDEZVOUS when the root daemon refuses this node's for that long;
    COLL_ERR_DENIED for a wrong job token).

    Args:
        socket (str): the daemon's socket (COLL_SOCKET).
        job (str): job id, the same on every rank (COLL_JOB).
        rank, world_size (int): global rank and number of ranks, given together.
        local_rank, local_size (int): rank and number of ranks on this node, together.
        root (str): ``host:port`` of node 0's daemon (COLL_ROOT).
        timeout (float): the job's timeout in seconds (COLL_TIMEOUT_MS): the longest the
            rendezvous, and the daemon's side of each operation, may take.
        pool_size (int): bytes of the job's shared pool per node (COLL_POOL_SIZE).
        job_token (str | bytes): the secret shared by the job's ranks (COLL_JOB_TOKEN).
        connect_timeout (float): seconds connecting may wait for the node's daemon and for the
            root daemon (COLL_CONNECT_TIMEOUT_MS; default 10; 0: the job's timeout).
        op_timeout (float | None): this process's bound, in seconds, on every operation; one
            that takes longer fails with COLL_ERR_TIMEDOUT. None (default): no bound of its own
            (the daemon still fails operations after the job's timeout).

    Buffers: every collective works in place on pool memory. Allocate it with :meth:`empty`,
    :meth:`zeros` (numpy) or :meth:`empty_tensor`, :meth:`zeros_tensor` (torch); all arrays
    must be C-contiguous. Passing other memory raises COLL_ERR_NOT_IN_POOL.

    Operations: each returns a :class:`~collective.Future` at once; its result is the output
    array (or None). Errors found at submission (a buffer outside the pool, a bad root, a
    failed job) are raised by the call itself, errors of the operation by the future. The arrays belong to the daemon until the future is done: do not write
    them (or read outputs) before. Ranks must call collectives in the same order, unless they
    pass ``key=`` (an int < 2**27, unique among operations in flight): operations with the
    same key are matched whatever the order; keys of point-to-point messages keep their low 23
    bits. Operations of different communicators (see :meth:`split`) never match. ``algo=``
    forces an algorithm
    (``"ring"``, ``"rd"``, ``"chain"``, ``"dissemination"``, ``"direct"``, ``"nccl"``,
    ``"device"``;
    default COLL_ALGO or auto),
    ``timeout=`` overrides ``op_timeout`` for one operation.

    Thread-safety: all methods may be called from any thread. Futures complete on the
    communicator's progress thread (see :mod:`collective.progress`).

    Lifetime: :meth:`close` (or leaving a ``with`` block, or exit) fails pending operations with
    COLL_ERR_CLOSED and leaves the job as soon as no array from the pool is left alive; pool
    arrays stay valid until they are garbage-collected.
    """

    def __init__(self, *, socket=None, job=None, rank=None, world_size=None, local_rank=None,
                 local_size=None, root=None, timeout=None, pool_size=None, job_token=None,
                 op_timeout=None, connect_timeout=None):
        lib = _lib.load()
        params = _params(socket, job, rank, world_size, local_rank, local_size, root, timeout,
                         pool_size, job_token, connect_timeout)
        ptr = ctypes.c_void_p()
        st = lib.coll_comm_create(ctypes.byref(params), ctypes.byref(ptr))
        if st != _lib.COLL_OK:
            why = lib.coll_comm_last_error(None) or b""  # this thread's failed create
            raise make_error(st, why.decode(errors="replace"), "coll_comm_create")
        self._setup(lib, ptr.value, op_timeout)

    def _setup(self, lib, ptr, op_timeout):
        self._native = Native(lib, ptr)
        self._lib = lib
        self.rank = lib.coll_comm_rank(ptr)
        self.world_size = lib.coll_comm_world_size(ptr)
        self.local_rank = lib.coll_comm_local_rank(ptr)
        self.local_size = lib.coll_comm_local_size(ptr)
        self.node_count = lib.coll_comm_node_count(ptr)
        self.op_timeout = op_timeout
        # The default compression spec (COLL_COMPRESSION, which coll_comm_create() checked).
        self.compression = os.environ.get("COLL_COMPRESSION") or "none"
        self._progress = Progress(self._native, "collective-progress-r%d" % self.rank)
        self._timeline = Timeline(self._native)
        # Runs on close(), when the communicator is collected, or at exit.
        self._finalizer = weakref.finalize(self, _close, self._timeline, self._progress,
                                           self._native)

    @classmethod
    def _adopt(cls, lib, ptr, op_timeout):
        """A Communicator around a coll_comm_t * that coll_comm_split() made."""
        self = cls.__new__(cls)
        self._setup(lib, ptr, op_timeout)
        return self

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return "<collective.Communicator rank %d/%d local %d/%d nodes %d %s>" % (
            self.rank, self.world_size, self.local_rank, self.local_size, self.node_count,
            state)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        """True after :meth:`close`."""
        return self._native.closed or not self._finalizer.alive

    def close(self):
        """Fail pending operations (COLL_ERR_CLOSED) and leave the job once no pool array is
        alive. Idempotent; safe from any thread, including a done-callback."""
        self._finalizer()

    def abort(self, reason):
        """End the job on every rank (``coll_comm_abort``): every rank's pending and later
        operations fail with COLL_ERR_JOB and a message naming this rank and @reason (str).
        For a rank that found something fatal (a NaN loss) and must not leave the others
        waiting. The communicator stays to be closed."""
        self._native.abort(str(reason))

    # ---- timeline -------------------------------------------------------------------------
    @property
    def timeline_enabled(self):
        """True when this rank writes a timeline (COLL_TIMELINE was set and its file opened).
        It is flushed every second and at exit (:mod:`collective.timeline`)."""
        return self._timeline.enabled

    def timeline_flush(self):
        """Write the timeline's buffered events now; the file is complete JSON afterwards."""
        self._timeline.flush()

    def timeline_span(self, track, name, begin_ns, end_ns):
        """Add a span from @begin_ns to @end_ns (``time.monotonic_ns()``) on row @track."""
        self._timeline.span(track, name, begin_ns, end_ns)

    def span(self, track, name):
        """A context manager that records its block as a span: ``with comm.span("step",
        "backward"): ...``. Costs nothing without a timeline."""
        return Span(self._timeline, track, name)

    # ---- groups ---------------------------------------------------------------------------
    def split(self, color, key=0):
        """``coll_comm_split``: the ranks of this communicator that give the same @color (an
        int >= 0) form a new communicator, ordered by @key (an int; ties by rank here).
        Collective: every rank must call it, in the same order as its other collectives, from
        the thread that created this communicator. @color None (or COLL_UNDEFINED, -1) joins
        no group and returns None. The new communicator shares this one's pool and daemon; it
        is closed on its own (before or after this one). Raises CollectiveError on failure
        (the same on every rank)."""
        color = _lib.COLL_UNDEFINED if color is None else int(color)
        ptr = ctypes.c_void_p()
        self._native.call(self._lib.coll_comm_split, "coll_comm_split", color, int(key),
                          ctypes.byref(ptr))
        return Communicator._adopt(self._lib, ptr.value, self.op_timeout) if ptr.value else None

    def job_rank(self, rank):
        """The job (world) rank of rank @rank of this communicator; ValueError when out of
        range."""
        r = self._lib.coll_comm_job_rank(self._native.handle(), int(rank))
        if r < 0:
            raise ValueError("rank %r is not in 0..%d" % (rank, self.world_size - 1))
        return r

    @property
    def last_error(self):
        """``coll_comm_last_error``: the detailed message of the last failure, or ""."""
        return self._native.last_error()

    # ---- pool memory ----------------------------------------------------------------------
    def empty(self, shape, dtype="float32"):
        """A numpy array of @shape (int or tuple) in the pool, uninitialized. @dtype: a numpy
        dtype or a name (``"bfloat16"`` gives uint16 storage: pass ``dtype="bfloat16"`` to the
        collectives). Raises CollectiveError COLL_ERR_POOL_FULL when the pool has no room."""
        return numpy_array(self._native, shape, dtype)

    def zeros(self, shape, dtype="float32"):
        """As :meth:`empty`, filled with zeros."""
        a = self.empty(shape, dtype)
        a.fill(0)
        return a

    def empty_tensor(self, shape, dtype=None):
        """A CPU torch tensor of @shape in the pool, uninitialized; @dtype a torch dtype or a
        name, default torch.float32."""
        return torch_tensor(self._native, shape, "float32" if dtype is None else dtype)

    def zeros_tensor(self, shape, dtype=None):
        """As :meth:`empty_tensor`, filled with zeros."""
        return self.empty_tensor(shape, dtype).zero_()

    def free(self, x):
        """Return the pool allocation @x lies in to the pool now instead of at garbage
        collection. @x and every view of that allocation must not be used afterwards (their
        memory may be handed out again). Raises ValueError when @x is not in a live
        allocation of this communicator, CollectiveError COLL_ERR_BUSY (nothing changes) while
        an operation in flight still uses it."""
        self._native.free(address(x))

    # ---- compression ----------------------------------------------------------------------
    def set_compression(self, spec):
        """Make @spec (``"none"``, ``"fp16"``, ``"bf16"``, ``"topk:0.01"``, ``"onebit"``,
        ``"powersgd:2"``, ``"auto"``, optionally with ``",noef"`` and ``",warmup=N"``; the
        syntax of COLL_COMPRESSION) the default of every later operation that names none.
        Every rank must use the same. Raises ValueError for a malformed spec."""
        c = parse_compression(self._lib, spec)
        self._native.call(self._lib.coll_comm_set_compression, "coll_comm_set_compression",
                          ctypes.byref(c))
        self.compression = spec

    def register_layout(self, layout, shapes):
        """Tell the daemon the tensors the nonzero fingerprint @layout stands for: @shapes, a
        sequence of (rows, cols), each tensor a matrix of the bucket in order (a tensor of shape
        (d0, d1, ...) is d0 x d1*...; a vector of n is (n, 1)). PowerSGD needs them
        (coll_layout_register()). Blocks for a round trip to the daemon."""
        flat = [int(v) for rc in shapes for v in rc]
        arr = (ctypes.c_uint64 * len(flat))(*flat)
        self._native.call(self._lib.coll_layout_register, "coll_layout_register", layout,
                          len(flat) // 2, arr)

    # ---- operations -----------------------------------------------------------------------
    def _op_params(self, key, algo, layout=None, compression=None, bucket=0):
        if key is None and algo is None and layout is None and compression is None:
            return None
        p = _lib.OpParams()
        if key is not None:
            if not 0 <= key < (1 << 27):
                raise ValueError("key %r is not in [0, 2**27)" % (key,))
            p.field_mask |= _lib.OP_PARAM_KEY
            p.key = key
        if algo is not None:
            p.field_mask |= _lib.OP_PARAM_ALGO
            p.algo = parse_algo(algo)
        if layout is not None:
            if not 0 < layout < (1 << 64):
                raise ValueError("layout %r is not in (0, 2**64)" % (layout,))
            p.field_mask |= _lib.OP_PARAM_LAYOUT
            p.layout = layout
        if compression is not None:
            if not 0 <= bucket < (1 << 32):
                raise ValueError("bucket %r is not in [0, 2**32)" % (bucket,))
            p.field_mask |= _lib.OP_PARAM_COMPRESSION
            p.compression = parse_compression(self._lib, compression)
            p.compression.bucket = bucket
        return ctypes.byref(p)

    def _submit(self, name, fn, args, result, keep, key, algo, timeout, layout=None,
                compression=None, bucket=0):
        """Call the C function @fn(comm, *args, params, &req) and return the future."""
        req = ctypes.c_void_p()
        future = Future(name)
        params = self._op_params(key, algo, layout, compression, bucket)
        st = self._native.call(fn, name, *args, params, ctypes.byref(req))
        if st == _lib.COLL_OK:  # done at once
            future.set_result(result)
            return future
        self._progress.add(req.value, future, result, keep,
                           self.op_timeout if timeout is None else timeout)
        return future

    def allreduce(self, x, out=None, op="sum", *, dtype=None, key=None, algo=None,
                  timeout=None, layout=None, compression=None, bucket=0):
        """Every rank's @out receives the element-wise reduction @op (``"sum"``, ``"avg"``,
        ``"prod"``, ``"min"``, ``"max"``; for integer dtypes also the bitwise ``"band"``,
        ``"bor"``, ``"bxor"``) over all ranks' @x. In place when @out is None.
        @x, @out: pool arrays of the same number of elements and dtype. @layout: a nonzero
        64-bit fingerprint of the tensors @x is made of, compared across ranks like the count
        (coll_op_params_t.layout). @compression: a spec as :meth:`set_compression` takes, for
        this operation (None: the communicator's default); @bucket: the residual it uses
        (coll_compression_t.bucket). Returns a Future of @out (x when in place), whose
        ``wire_bytes`` and ``dense_bytes`` say what the node sent."""
        out = x if out is None else out
        s, r = self._pair(x, out, dtype, 1)
        return self._submit("allreduce", self._lib.coll_allreduce_async,
                            (s.addr, r.addr, s.count, s.dtype, parse_op(op)), out, (x, out),
                            key, algo, timeout, layout, compression, bucket)

    def reduce_scatter(self, x, out=None, op="sum", *, dtype=None, key=None, algo=None,
                       timeout=None):
        """@x holds world_size blocks of n elements; rank r's @out (n elements) receives the
        reduction over all ranks of block r. Default @out: block r of @x, in place (a view
        of @x). Returns a Future of @out."""
        if out is None:
            out = x.reshape(-1)[self.rank * self._block(x): (self.rank + 1) * self._block(x)]
        r, s = self._pair(out, x, dtype, self.world_size)
        return self._submit("reduce_scatter", self._lib.coll_reduce_scatter_async,
                            (s.addr, r.addr, r.count, s.dtype, parse_op(op)), out, (x, out),
                            key, algo, timeout)

    def allgather(self, x, out=None, *, dtype=None, key=None, algo=None, timeout=None):
        """@out (world_size blocks of x's n elements) receives every rank's @x in rank order.
        Default @out: a new 1-D pool array (or tensor) of world_size * n elements. In place
        when @x is block r of @out. Returns a Future of @out."""
        if out is None:
            out = self._like(x, self.world_size * _count(x))
        s, r = self._pair(x, out, dtype, self.world_size)
        return self._submit("allgather", self._lib.coll_allgather_async,
                            (s.addr, r.addr, s.count, s.dtype), out, (x, out), key, algo,
                            timeout)

    def broadcast(self, x, root=0, out=None, *, dtype=None, key=None, algo=None,
                  timeout=None):
        """Every rank's @out receives rank @root's @x; in place when @out is None. Returns a
        Future of @out."""
        out = x if out is None else out
        s, r = self._pair(x, out, dtype, 1)
        return self._submit("broadcast", self._lib.coll_broadcast_async,
                            (s.addr, r.addr, s.count, s.dtype, root), out, (x, out), key, algo,
                            timeout)

    def reduce(self, x, out=None, op="sum", root=0, *, dtype=None, key=None, algo=None,
               timeout=None):
        """Rank @root's @out receives the reduction @op over all ranks' @x; in place when
        @out is None. @out is written at the root only. Returns a Future of @out."""
        out = x if out is None else out
        s, r = self._pair(x, out, dtype, 1)
        return self._submit("reduce", self._lib.coll_reduce_async,
                            (s.addr, r.addr, s.count, s.dtype, parse_op(op), root), out,
                            (x, out), key, algo, timeout)

    def gather(self, x, out=None, root=0, *, dtype=None, key=None, algo=None, timeout=None):
        """Rank @root's @out (world_size blocks of x's n elements) receives every rank's @x in
        rank order. At the root the default @out is a new 1-D pool array (or tensor) of
        world_size * n elements, in place when @x is block root of @out; elsewhere @out is
        ignored. Returns a Future of @out (None but at the root)."""
        if self.rank != root:
            s = buffer_info(x, dtype)
            return self._submit("gather", self._lib.coll_gather_async,
                                (s.addr, None, s.count, s.dtype, root), None, x, key, algo,
                                timeout)
        if out is None:
            out = self._like(x, self.world_size * _count(x))
        s, r = self._pair(x, out, dtype, self.world_size)
        return self._submit("gather", self._lib.coll_gather_async,
                            (s.addr, r.addr, s.count, s.dtype, root), out, (x, out), key, algo,
                            timeout)

    def scatter(self, x, out=None, root=0, *, dtype=None, key=None, algo=None, timeout=None):
        """Every rank r's @out receives block r of rank @root's @x (world_size blocks of n
        elements). At the root the default @out is block root of @x (a view, in place);
        elsewhere @x is ignored (may be None) and @out (n elements) must be given. Returns a
        Future of @out."""
        if self.rank != root:
            if out is None:
                raise ValueError("scatter: rank %d is not the root (%d): give out"
                                 % (self.rank, root))
            r = buffer_info(out, dtype)
            return self._submit("scatter", self._lib.coll_scatter_async,
                                (None, r.addr, r.count, r.dtype, root), out, out, key, algo,
                                timeout)
        if out is None:
            out = x.reshape(-1)[root * self._block(x): (root + 1) * self._block(x)]
        r, s = self._pair(out, x, dtype, self.world_size)
        return self._submit("scatter", self._lib.coll_scatter_async,
                            (s.addr, r.addr, r.count, s.dtype, root), out, (x, out), key, algo,
                            timeout)

    def alltoallv(self, x, sendcounts, recvcounts, out=None, sdispls=None, rdispls=None, *,
                  dtype=None, key=None, algo=None, timeout=None):
        """All-to-all with per-rank sizes (MPI_Alltoallv): @sendcounts[j] elements of @x at
        @sdispls[j] go to rank j, which receives them in its @out at its @rdispls[r] (where it
        expects its @recvcounts[r] of them). Counts and displacements are in elements,
        world_size of each; displacements default to the blocks packed in rank order. Default
        @out: a new 1-D pool array (or tensor) that holds every received block. Every pair of
        ranks must agree on its count and every rank on the dtype, or the operation fails on
        every rank with CollectiveError COLL_ERR_MISMATCH and no @out written. Raises
        ValueError for lists of another length, entries that are not integers >= 0 and blocks
        past the end of @x or @out (a block of 0 elements touches nothing, wherever it is);
        receive blocks that overlap fail with CollectiveError COLL_ERR_INVALID. Returns a
        Future of @out."""
        ws = self.world_size
        sendcounts, recvcounts = _sizes(sendcounts, ws, "sendcounts"), _sizes(recvcounts, ws,
                                                                                 "recvcounts")
        sdispls = _packed(sendcounts) if sdispls is None else _sizes(sdispls, ws, "sdispls")
        rdispls = _packed(recvcounts) if rdispls is None else _sizes(rdispls, ws, "rdispls")
        if out is None:
            out = self._like(x, _end(recvcounts, rdispls))
        s, r = buffer_info(x, dtype), buffer_info(out, dtype)
        if s.dtype != r.dtype:
            raise TypeError("buffers have different dtypes: %s and %s"
                            % (s.dtype.name.lower(), r.dtype.name.lower()))
        for what, counts, displs, buf in (("send", sendcounts, sdispls, s),
                                          ("receive", recvcounts, rdispls, r)):
            if _end(counts, displs) > buf.count:
                raise ValueError("alltoallv: the %s blocks end at element %d, beyond the %d of "
                                 "the %s buffer" % (what, _end(counts, displs), buf.count,
                                                    what))
        arrays = [(ctypes.c_size_t * ws)(*v) for v in (sendcounts, sdispls, recvcounts, rdispls)]
        return self._submit("alltoallv", self._lib.coll_alltoallv_async,
                            (s.addr, arrays[0], arrays[1], r.addr, arrays[2], arrays[3],
                             s.dtype), out, (x, out), key, algo, timeout)

    def barrier(self, *, key=None, algo=None, timeout=None):
        """Completes once every rank entered the barrier. Returns a Future of None."""
        return self._submit("barrier", self._lib.coll_barrier_async, (), None, None, key, algo,
                            timeout)

    def send(self, x, peer, *, dtype=None, key=None, timeout=None):
        """Send @x to rank @peer, matched with its :meth:`recv` from this rank (the n-th send
        to a peer with its n-th receive, or by @key). Returns a Future of None that completes
        once the data left @x."""
        s = buffer_info(x, dtype)
        return self._submit("send", self._lib.coll_send_async, (s.addr, s.count, s.dtype, peer),
                            None, x, key, None, timeout)

    def recv(self, x, peer, *, dtype=None, key=None, timeout=None):
        """Receive from rank @peer into @x (its size must match the send). Returns a Future
        of @x."""
        s = buffer_info(x, dtype)
        return self._submit("recv", self._lib.coll_recv_async, (s.addr, s.count, s.dtype, peer),
                            x, x, key, None, timeout)

    # ---- helpers --------------------------------------------------------------------------
    @staticmethod
    def _pair(small, big, dtype, factor):
        """Buffer infos of @small and @big, checked: same dtype, big = factor x small."""
        s, b = buffer_info(small, dtype), buffer_info(big, dtype)
        if s.dtype != b.dtype:
            raise TypeError("buffers have different dtypes: %s and %s"
                            % (s.dtype.name.lower(), b.dtype.name.lower()))
        if b.count != factor * s.count:
            raise ValueError("buffer sizes do not fit: %d elements vs %d (expected %d x)"
                             % (b.count, s.count, factor))
        return s, b

    def _block(self, x):
        n = _count(x)
        if n % self.world_size:
            raise ValueError("%d elements do not split into %d blocks" % (n, self.world_size))
        return n // self.world_size

    def _like(self, x, count):
        if is_tensor(x):
            return self.empty_tensor(count, x.dtype)
        return self.empty(count, x.dtype)


def _close(timeline, progress, native):
    timeline.stop()
    progress.stop(native.close)


def _count(x):
    return x.numel() if is_tensor(x) else x.size


def _sizes(values, n, what):
    """@values as a list of @n integers >= 0 (an alltoallv's counts or displacements)."""
    try:
        values = [operator.index(v) for v in values]
    except TypeError:
        values = None
    if values is None or len(values) != n or any(v < 0 for v in values):
        raise ValueError("alltoallv: %s must be %d integers >= 0" % (what, n))
    return values


def _end(counts, displs):
    """The end, in elements, of the furthest block with a count above 0."""
    return max([d + n for d, n in zip(displs, counts) if n > 0] + [0])


def _packed(counts):
    """Displacements of blocks of @counts elements packed in order."""
    return [sum(counts[:i]) for i in range(len(counts))]

