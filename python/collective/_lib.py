"""Loading libcollective and declaring its C API for ctypes.

The library is looked for, in order:

1. ``$COLLECTIVE_LIB``: a path to ``libcollective.so`` (only this one is tried when set);
2. next to the package in the build tree: ``<build>/python/collective/`` is a copy of this
   package and the library is ``<build>/client/libcollective.so``;
3. in an installed tree, the library directory of the same prefix (``_installed.py``, written
   by ``cmake --install``, holds the way there);
4. the system loader: ``libcollective.so.0`` (in a directory that ld.so searches), then
   whatever :func:`ctypes.util.find_library` finds.

Every function is called through :class:`ctypes.CDLL`, which releases the GIL for the duration
of each call: a thread blocked in ``coll_req_wait`` or ``coll_comm_create`` does not stop the
other Python threads.
"""

import ctypes
import ctypes.util
import os
import threading

LIB_ENV = "COLLECTIVE_LIB"
SONAME = "libcollective.so.0"

# Status codes this module needs by value (the full table lives in the library).
COLL_OK = 0
COLL_INPROGRESS = 1
COLL_ERR_BUSY = -16
COLL_ERR_INVALID = -22
COLL_ERR_TIMEDOUT = -110
COLL_ERR_CLOSED = -1005

# coll_comm_split()'s color of a rank that joins no group.
COLL_UNDEFINED = -1

# coll_comm_params_t.field_mask bits.
PARAM_SOCKET = 1 << 0
PARAM_JOB = 1 << 1
PARAM_RANK = 1 << 2
PARAM_LOCAL_RANK = 1 << 3
PARAM_ROOT = 1 << 4
PARAM_TIMEOUT = 1 << 5
PARAM_POOL_SIZE = 1 << 6
PARAM_TOKEN = 1 << 7
PARAM_CONNECT_TIMEOUT = 1 << 8

# coll_op_params_t.field_mask bits.
OP_PARAM_KEY = 1 << 0
OP_PARAM_ALGO = 1 << 1
OP_PARAM_LAYOUT = 1 << 2
OP_PARAM_COMPRESSION = 1 << 3
OP_PARAM_STREAM = 1 << 4


class CommParams(ctypes.Structure):
    """coll_comm_params_t (fields in the header's order; new fields are appended there)."""

    _fields_ = [
        ("field_mask", ctypes.c_uint64),
        ("socket_path", ctypes.c_char_p),
        ("job", ctypes.c_char_p),
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("local_rank", ctypes.c_int),
        ("local_size", ctypes.c_int),
        ("root", ctypes.c_char_p),
        ("timeout_ms", ctypes.c_int),
        ("pool_bytes", ctypes.c_uint64),
        ("job_token", ctypes.c_char_p),
        ("connect_timeout_ms", ctypes.c_int),
    ]


class Compression(ctypes.Structure):
    """coll_compression_t."""

    _fields_ = [
        ("method", ctypes.c_int),
        ("ratio", ctypes.c_double),
        ("rank", ctypes.c_uint),
        ("flags", ctypes.c_uint),
        ("warmup", ctypes.c_uint),
        ("bucket", ctypes.c_uint32),
    ]


class OpParams(ctypes.Structure):
    """coll_op_params_t."""

    _fields_ = [
        ("field_mask", ctypes.c_uint64),
        ("key", ctypes.c_uint64),
        ("algo", ctypes.c_int),
        ("layout", ctypes.c_uint64),
        ("compression", Compression),
        ("stream", ctypes.c_void_p),
    ]


class ReqTiming(ctypes.Structure):
    """coll_req_timing_t: CLOCK_MONOTONIC nanoseconds of each phase (0: phase not taken)."""

    _fields_ = [
        ("submit_ns", ctypes.c_uint64),
        ("ready_ns", ctypes.c_uint64),
        ("peers_ns", ctypes.c_uint64),
        ("reduced_ns", ctypes.c_uint64),
        ("done_ns", ctypes.c_uint64),
        ("complete_ns", ctypes.c_uint64),
    ]


class PsOptim(ctypes.Structure):
    """coll_ps_optim_t (include/collective_ps.h)."""

    _fields_ = [
        ("kind", ctypes.c_int),
        ("momentum", ctypes.c_double),
        ("dampening", ctypes.c_double),
        ("weight_decay", ctypes.c_double),
        ("nesterov", ctypes.c_int),
        ("beta1", ctypes.c_double),
        ("beta2", ctypes.c_double),
        ("eps", ctypes.c_double),
        ("eta", ctypes.c_double),
        ("lamb_bias", ctypes.c_int),
        ("eps_inside_sqrt", ctypes.c_int),
        ("trust_min", ctypes.c_double),
        ("trust_max", ctypes.c_double),
        ("phi_min", ctypes.c_double),
        ("phi_max", ctypes.c_double),
        ("grad_averaging", ctypes.c_int),
        ("l2", ctypes.c_int),
        ("clip_grad_norm", ctypes.c_double),
        ("clip_eps", ctypes.c_double),
    ]


PS_MAX_MILESTONES = 16
# coll_ps_params_t.field_mask bits.
PS_PARAM_KEY_SPACE = 1 << 0
PS_PARAM_COMPRESSION = 1 << 1


class PsSchedule(ctypes.Structure):
    """coll_ps_schedule_t."""

    _fields_ = [
        ("base_lr", ctypes.c_double),
        ("base_batch", ctypes.c_uint64),
        ("global_batch", ctypes.c_uint64),
        ("warmup_steps", ctypes.c_uint64),
        ("warmup_start_lr", ctypes.c_double),
        ("decay", ctypes.c_int),
        ("milestones", ctypes.c_uint64 * PS_MAX_MILESTONES),
        ("num_milestones", ctypes.c_uint),
        ("gamma", ctypes.c_double),
        ("total_steps", ctypes.c_uint64),
        ("final_lr", ctypes.c_double),
    ]


class PsLayer(ctypes.Structure):
    """coll_ps_layer_t."""

    _fields_ = [("count", ctypes.c_size_t), ("flags", ctypes.c_uint), ("bucket", ctypes.c_size_t)]


class PsParams(ctypes.Structure):
    """coll_ps_params_t."""

    _fields_ = [
        ("field_mask", ctypes.c_uint64),
        ("params", ctypes.c_void_p),
        ("layers", ctypes.POINTER(PsLayer)),
        ("num_layers", ctypes.c_size_t),
        ("optim", PsOptim),
        ("schedule", PsSchedule),
        ("key_space", ctypes.c_uint),
        ("compression", Compression),
    ]


class Layout(ctypes.Structure):
    """coll_layout_t: sizes and rank order (coll_dim_t, fastest first) of a (tp, pp, dp)."""

    _fields_ = [
        ("size", ctypes.c_int * 3),
        ("order", ctypes.c_int * 3),
    ]


_status = ctypes.c_int
_comm = ctypes.c_void_p
_req = ctypes.c_void_p
_req_p = ctypes.POINTER(ctypes.c_void_p)
_buf = ctypes.c_void_p
_size = ctypes.c_size_t
_op_params = ctypes.POINTER(OpParams)

# name: (restype, argtypes). The signatures of include/collective.h.
_PROTOTYPES = {
    "coll_strerror": (ctypes.c_char_p, [_status]),
    "coll_err_name": (ctypes.c_char_p, [_status]),
    "coll_dtype_size": (_size, [ctypes.c_int]),
    "coll_comm_create": (_status, [ctypes.POINTER(CommParams), ctypes.POINTER(_comm)]),
    "coll_comm_destroy": (None, [_comm]),
    "coll_comm_rank": (ctypes.c_int, [_comm]),
    "coll_comm_world_size": (ctypes.c_int, [_comm]),
    "coll_comm_local_rank": (ctypes.c_int, [_comm]),
    "coll_comm_local_size": (ctypes.c_int, [_comm]),
    "coll_comm_last_error": (ctypes.c_char_p, [_comm]),
    "coll_comm_abort": (_status, [_comm, ctypes.c_char_p]),
    "coll_mem_alloc": (_status, [_comm, _size, ctypes.POINTER(ctypes.c_void_p)]),
    "coll_mem_free": (_status, [_comm, _buf]),
    "coll_allreduce_async": (_status, [_comm, _buf, _buf, _size, ctypes.c_int, ctypes.c_int,
                                       _op_params, _req_p]),
    "coll_reduce_scatter_async": (_status, [_comm, _buf, _buf, _size, ctypes.c_int,
                                            ctypes.c_int, _op_params, _req_p]),
    "coll_allgather_async": (_status, [_comm, _buf, _buf, _size, ctypes.c_int, _op_params,
                                       _req_p]),
    "coll_broadcast_async": (_status, [_comm, _buf, _buf, _size, ctypes.c_int, ctypes.c_int,
                                       _op_params, _req_p]),
    "coll_reduce_async": (_status, [_comm, _buf, _buf, _size, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_int, _op_params, _req_p]),
    "coll_gather_async": (_status, [_comm, _buf, _buf, _size, ctypes.c_int, ctypes.c_int,
                                    _op_params, _req_p]),
    "coll_scatter_async": (_status, [_comm, _buf, _buf, _size, ctypes.c_int, ctypes.c_int,
                                     _op_params, _req_p]),
    "coll_alltoallv_async": (_status, [_comm, _buf, ctypes.POINTER(_size),
                                       ctypes.POINTER(_size), _buf, ctypes.POINTER(_size),
                                       ctypes.POINTER(_size), ctypes.c_int, _op_params,
                                       _req_p]),
    "coll_barrier_async": (_status, [_comm, _op_params, _req_p]),
    "coll_send_async": (_status, [_comm, _buf, _size, ctypes.c_int, ctypes.c_int, _op_params,
                                  _req_p]),
    "coll_recv_async": (_status, [_comm, _buf, _size, ctypes.c_int, ctypes.c_int, _op_params,
                                  _req_p]),
    "coll_req_test": (_status, [_req]),
    "coll_req_wait": (_status, [_req, ctypes.c_int]),
    "coll_req_algo": (ctypes.c_char_p, [_req]),
    "coll_req_timing": (_status, [_req, ctypes.POINTER(ReqTiming)]),
    "coll_req_wire_bytes": (_status, [_req, ctypes.POINTER(ctypes.c_uint64),
                                      ctypes.POINTER(ctypes.c_uint64)]),
    "coll_compression_parse": (_status, [ctypes.c_char_p, ctypes.POINTER(Compression)]),
    "coll_comm_set_compression": (_status, [_comm, ctypes.POINTER(Compression)]),
    "coll_layout_register": (_status, [_comm, ctypes.c_uint64, _size,
                                       ctypes.POINTER(ctypes.c_uint64)]),
    "coll_req_free": (None, [_req]),
    "coll_timeline_span": (_status, [_comm, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64,
                                     ctypes.c_uint64]),
    "coll_timeline_enabled": (ctypes.c_int, [_comm]),
    "coll_timeline_flush": (_status, [_comm]),
    # The parameter service (include/collective_ps.h).
    "coll_ps_optim_init": (None, [ctypes.c_int, ctypes.POINTER(PsOptim)]),
    "coll_ps_optim_default_lr": (ctypes.c_double, [ctypes.c_int]),
    "coll_ps_optimizer_parse": (_status, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "coll_ps_schedule_constant": (None, [ctypes.c_double, ctypes.POINTER(PsSchedule)]),
    "coll_ps_create": (_status, [_comm, ctypes.POINTER(PsParams), ctypes.POINTER(ctypes.c_void_p)]),
    "coll_ps_destroy": (None, [ctypes.c_void_p]),
    "coll_ps_num_buckets": (_size, [ctypes.c_void_p]),
    "coll_ps_steps": (ctypes.c_uint64, [ctypes.c_void_p]),
    "coll_ps_step": (_status, [ctypes.c_void_p, _buf]),
    "coll_ps_save": (_status, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(_size)]),
    "coll_ps_load": (_status, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(_size), _size]),
    "coll_comm_split": (_status, [_comm, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_comm)]),
    "coll_comm_node_count": (ctypes.c_int, [_comm]),
    "coll_comm_job_rank": (ctypes.c_int, [_comm, ctypes.c_int]),
    "coll_layout_init": (_status, [ctypes.POINTER(Layout), ctypes.c_int, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_char_p]),
    "coll_layout_coords": (_status, [ctypes.POINTER(Layout), ctypes.c_int,
                                     ctypes.POINTER(ctypes.c_int)]),
    "coll_layout_group": (_status, [ctypes.POINTER(Layout), ctypes.c_int, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]),
}

_lock = threading.Lock()
_lib = None


def libc_free(ptr):
    """free(3) of memory the library malloc()ed for the caller (coll_ps_save's image)."""
    global _free
    if _free is None:
        _free = ctypes.CDLL(None).free
        _free.argtypes, _free.restype = [ctypes.c_void_p], None
    _free(ptr)


_free = None


class LibraryNotFoundError(OSError):
    """libcollective could not be loaded; the message lists every place that was tried."""


def _candidates():
    """Paths or names to try, in order (see the module docstring)."""
    path = os.environ.get(LIB_ENV)
    if path:
        return [path]
    here = os.path.dirname(os.path.abspath(__file__))
    names = [os.path.normpath(os.path.join(here, "..", "..", "client", "libcollective.so"))]
    try:
        from ._installed import LIBDIR_FROM_PACKAGE
        names.append(os.path.normpath(os.path.join(here, LIBDIR_FROM_PACKAGE, SONAME)))
    except ImportError:
        pass
    names.append(SONAME)
    found = ctypes.util.find_library("collective")
    if found:
        names.append(found)
    return names


def _declare(lib):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def load():
    """Load libcollective once per process and return it (a :class:`ctypes.CDLL`).

    Thread-safe. Raises :class:`LibraryNotFoundError` naming every candidate and why it failed.
    """
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for cand in _candidates():
            if os.sep in cand and not os.path.exists(cand):
                errors.append("%s: no such file" % cand)
                continue
            try:
                _lib = _declare(ctypes.CDLL(cand))
                return _lib
            except (OSError, AttributeError) as e:
                errors.append("%s: %s" % (cand, e))
        raise LibraryNotFoundError(
            "cannot load libcollective (set %s to the path of libcollective.so); tried: %s"
            % (LIB_ENV, "; ".join(errors)))
