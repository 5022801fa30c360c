"""The native communicator handle and pool memory wrapped as numpy arrays and torch tensors.

Ownership: every allocation from ``coll_mem_alloc`` is exposed through one ctypes array (the
*exporter*) that numpy or torch wraps without copying (``numpy.frombuffer``,
``torch.frombuffer``). The arrays and tensors, and all their views, keep the exporter alive;
when the last of them is garbage-collected the allocation goes back to the pool. The
communicator itself (``coll_comm_destroy``: the rank leaves the job, the pool is unmapped) is
destroyed only once it was closed *and* no exporter is left, so Python code can never touch
unmapped memory.
"""

import ctypes
import threading
import weakref

from . import _lib
from .errors import make_error
from .types import numpy_dtype, torch_dtype


class Native:
    """Owns one ``coll_comm_t *`` and its pool allocations. Thread-safe.

    The C library takes the communicator's lock in every call; the lock here only orders
    calls against destruction and guards the allocation table.
    """

    def __init__(self, lib, ptr):
        self.lib = lib
        self.ptr = ptr  # c_void_p value (int); None once destroyed
        self._lock = threading.RLock()
        self._closed = False
        self._exports = 0  # live exporters (allocations some Python object still refers to)
        self._allocs = {}  # start address -> (bytes, token) of allocations not yet freed

    # ---- errors ---------------------------------------------------------------------------
    def last_error(self):
        """``coll_comm_last_error``, or "" after destruction."""
        with self._lock:
            if self.ptr is None:
                return ""
            return self.lib.coll_comm_last_error(self.ptr).decode(errors="replace")

    def abort(self, reason):
        """``coll_comm_abort``: end the job on every rank with @reason."""
        with self._lock:
            if self.ptr is None:
                return
            self.check(self.lib.coll_comm_abort(self.ptr, reason.encode()), "abort")

    def check(self, status, context=""):
        """Raise the exception of @status when it is negative; return it otherwise."""
        if status < 0:
            raise make_error(status, self.last_error(), context)
        return status

    def handle(self):
        """The raw pointer, for a C call; raises ValueError once closed."""
        if self._closed or self.ptr is None:
            raise ValueError("the communicator is closed")
        return self.ptr

    def call(self, fn, context, *args):
        """@fn(comm, *args), a C function returning a status, ordered against destruction;
        returns the status, or raises its exception (@context names the call)."""
        with self._lock:
            return self.check(fn(self.handle(), *args), context)

    # ---- memory ---------------------------------------------------------------------------
    def alloc(self, nbytes):
        """Allocate @nbytes (> 0) in the pool; returns the exporter (a ctypes char array).

        Raises CollectiveError (COLL_ERR_POOL_FULL, COLL_ERR_CLOSED, ...) on failure.
        """
        ptr = ctypes.c_void_p()
        with self._lock:
            self.call(self.lib.coll_mem_alloc, "coll_mem_alloc(%d bytes)" % nbytes, nbytes,
                      ctypes.byref(ptr))
            token = object()
            self._allocs[ptr.value] = (nbytes, token)
            self._exports += 1
        exporter = (ctypes.c_char * nbytes).from_address(ptr.value)
        fin = weakref.finalize(exporter, self._release, ptr.value, token)
        fin.atexit = False  # at exit the process's goodbye frees everything
        return exporter

    def free(self, addr):
        """Return the allocation that contains @addr to the pool now (coll_mem_free).

        Arrays still referring to it must not be used afterwards: their memory may be handed
        out again. Raises ValueError when @addr is in no live allocation, and CollectiveError
        COLL_ERR_BUSY (the allocation stays) while an operation in flight still uses it.
        """
        with self._lock:
            start = self._find(addr)
            if start is None:
                raise ValueError("address 0x%x is not in a live pool allocation" % addr)
            st = self.lib.coll_mem_free(self.ptr, start) if self.ptr is not None else 0
            if st != _lib.COLL_ERR_BUSY:
                del self._allocs[start]
            self.check(st, "coll_mem_free")

    def _find(self, addr):
        for start, (nbytes, _) in list(self._allocs.items()):  # a finalizer may run here
            if start <= addr < start + nbytes:
                return start
        return None

    def _release(self, addr, token):
        """Finalizer of an exporter: free the allocation unless it was freed explicitly."""
        with self._lock:
            entry = self._allocs.get(addr)
            if entry is not None and entry[1] is token:
                del self._allocs[addr]
                if self.ptr is not None:
                    self.lib.coll_mem_free(self.ptr, addr)
            self._exports -= 1
            self._maybe_destroy()

    # ---- lifetime -------------------------------------------------------------------------
    @property
    def closed(self):
        return self._closed

    def close(self):
        """Mark closed; destroy now, or when the last exporter goes. Idempotent."""
        with self._lock:
            self._closed = True
            self._maybe_destroy()

    def _maybe_destroy(self):
        if self._closed and self._exports == 0 and self.ptr is not None:
            ptr, self.ptr = self.ptr, None
            self._allocs.clear()
            self.lib.coll_comm_destroy(ptr)


def numpy_array(native, shape, dtype):
    """A numpy array of @shape and @dtype whose memory is a new pool allocation (uninitialized).

    @dtype: anything :func:`collective.types.parse_dtype` takes; bfloat16 gives a uint16 array.
    """
    import numpy as np
    dt = numpy_dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    exporter = native.alloc(max(count * dt.itemsize, dt.itemsize))
    return np.frombuffer(exporter, dtype=dt, count=count).reshape(shape)


def torch_tensor(native, shape, dtype):
    """A CPU torch tensor of @shape and @dtype over a new pool allocation (uninitialized)."""
    import torch
    dt = torch_dtype(dtype)
    if isinstance(shape, int):
        shape = (shape,)
    count = 1
    for n in shape:
        count *= int(n)
    itemsize = torch.empty((), dtype=dt).element_size()
    exporter = native.alloc(max(count * itemsize, itemsize))
    # torch.frombuffer refuses count 0: take one element and slice it away (still in the pool).
    flat = torch.frombuffer(exporter, dtype=dt, count=max(count, 1))[:count]
    return flat.view(shape)
