"""Futures of asynchronous operations and the thread that completes them.

Each communicator has one *progress thread*, started at its first operation. It sleeps in
``coll_req_wait`` on the oldest pending request (the C library sleeps in poll/futex and ctypes
releases the GIL meanwhile), wakes when that request completes or after a short slice, then
tests every pending request and completes the futures of those that finished. Futures complete,
and their done-callbacks run, on that thread.
"""

import collections
import concurrent.futures
import ctypes
import threading
import time

from . import _lib
from .errors import make_error

# How long the progress thread sleeps on the oldest request before it looks at the others (a
# later request finishing first is seen at most this late).
SLICE_MS = 5
# Bound on an idle progress thread's sleep (stop() and new requests wake it at once).
IDLE_S = 1.0
# How long close() waits for the progress thread to leave coll_req_wait.
JOIN_S = 10.0

Timing = collections.namedtuple(
    "Timing", "submit_ns ready_ns peers_ns reduced_ns done_ns complete_ns")
Timing.__doc__ = """Phase times of a completed operation: CLOCK_MONOTONIC nanoseconds (the
clock of time.monotonic_ns()), 0 for a phase it did not have. See coll_req_timing_t."""


class Future(concurrent.futures.Future):
    """The result of an asynchronous collective (a :class:`concurrent.futures.Future`).

    ``result(timeout=None)`` returns the operation's output array or tensor (``None`` for
    barrier and send) or raises :class:`~collective.CollectiveError`; a ``timeout`` (seconds)
    that expires first raises :class:`TimeoutError` and leaves the operation running.
    Futures cannot be cancelled: the daemon owns the buffers until the operation ends.
    Done-callbacks run on the communicator's progress thread: they must be short and must not
    wait on other futures of the same communicator (nothing would complete them).

    Attributes, set before the future completes:
        operation (str): the collective, e.g. ``"allreduce"``.
        algo (str): the algorithm that ran it (``"ring"``, ``"rd"``, ``"local"``, ``"shm"``,
            ``"shm+rd"``, ``"shm+ring"``, ...); may be "" on failure.
        timing (Timing | None): its phase times; None on failure.
        wire_bytes (int): bytes its node sent to other nodes for it; dense_bytes (int): what
            the uncompressed ring would have sent (coll_req_wire_bytes()); 0 on one node.
    """

    def __init__(self, operation):
        super().__init__()
        self.set_running_or_notify_cancel()
        self.operation = operation
        self.algo = ""
        self.timing = None
        self.wire_bytes = 0
        self.dense_bytes = 0

    def as_torch_future(self, transform=None):
        """A :class:`torch.futures.Future` completed with this future's result (passed through
        @transform when given) or its exception."""
        import torch
        tfut = torch.futures.Future()

        def done(f):
            try:
                value = f.result()
                tfut.set_result(transform(value) if transform is not None else value)
            except Exception as e:  # handed to whoever waits on tfut
                tfut.set_exception(e)

        self.add_done_callback(done)
        return tfut


class _Pending:
    __slots__ = ("req", "future", "result", "keep", "deadline")

    def __init__(self, req, future, result, keep, deadline):
        self.req = req
        self.future = future
        self.result = result
        self.keep = keep  # arrays the daemon reads or writes until the request ends
        self.deadline = deadline


class Progress:
    """Completes the futures of one communicator's requests. Thread-safe."""

    def __init__(self, native, name="collective-progress"):
        self._native = native
        self._lib = native.lib
        self._name = name
        self._cond = threading.Condition()
        self._pending = []
        self._stopping = False
        self._thread = None
        self._then = None
        self._zombies = []  # buffers of requests abandoned after a timeout

    def add(self, req, future, result, keep, timeout):
        """Track request @req (a pointer from a *_async call): when it ends, @future gets
        @result or the error. @keep is held until then. @timeout: seconds or None."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if self._stopping:  # closed by another thread since the submission
                self._lib.coll_req_free(req)
                raise ValueError("the communicator is closed")
            self._pending.append(_Pending(req, future, result, keep, deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def stop(self, then=None):
        """Stop the thread, fail what is still pending with COLL_ERR_CLOSED (the requests are
        freed, i.e. detached: the daemon may use their buffers until the communicator goes),
        then call @then(). When the thread is busy in a done-callback for longer than
        JOIN_S seconds, it does that itself when the callback returns. Idempotent."""
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            self._then = then
            self._cond.notify()
            thread = self._thread
        if thread is None:
            self._abandon()
        elif thread is not threading.current_thread():
            thread.join(JOIN_S)

    def _abandon(self):
        with self._cond:
            left, self._pending = self._pending, []
            self._zombies = []
            then, self._then = self._then, None
        for p in left:
            self._lib.coll_req_free(p.req)
            p.future.set_exception(make_error(_lib.COLL_ERR_CLOSED, "the communicator was "
                                              "closed before the operation completed",
                                              p.future.operation))
        if then is not None:
            then()

    def _run(self):
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait(IDLE_S)
                if self._stopping:
                    break
                oldest = self._pending[0]
                snapshot = list(self._pending)
            self._lib.coll_req_wait(oldest.req, SLICE_MS)  # GIL released while it sleeps
            ended = [(p, out) for p, out in ((p, self._poll(p)) for p in snapshot)
                     if out is not None]
            if not ended:
                continue
            with self._cond:
                gone = {id(p) for p, _ in ended}
                self._pending = [p for p in self._pending if id(p) not in gone]
            for p, (ok, value) in ended:
                p.keep = None
                if ok:
                    p.future.set_result(value)
                else:
                    p.future.set_exception(value)
        self._abandon()

    def _poll(self, p):
        """Test @p. While it runs: None. When it ended or timed out: (True, result) or
        (False, exception), with the future's algo and timing set and the request freed."""
        st = self._lib.coll_req_test(p.req)
        if st == _lib.COLL_INPROGRESS and (p.deadline is None or time.monotonic() < p.deadline):
            return None
        if st in (_lib.COLL_INPROGRESS, _lib.COLL_ERR_TIMEDOUT):
            # Not completed (our operation timeout, or the library's verdict on a daemon that
            # answers nothing): the daemon may still write into its buffers later.
            detail = ("not completed within the operation timeout" if st == _lib.COLL_INPROGRESS
                      else self._native.last_error())
            self._lib.coll_req_free(p.req)  # detached; its buffers stay referenced here
            with self._cond:
                self._zombies.append(p.keep)
            return False, make_error(_lib.COLL_ERR_TIMEDOUT, detail, p.future.operation)
        detail = self._native.last_error() if st < 0 else ""
        timing = _lib.ReqTiming()
        if st == _lib.COLL_OK and self._lib.coll_req_timing(p.req, ctypes.byref(timing)) == 0:
            p.future.timing = Timing(*(getattr(timing, f) for f in Timing._fields))
        p.future.algo = (self._lib.coll_req_algo(p.req) or b"").decode()
        sent, dense = ctypes.c_uint64(), ctypes.c_uint64()
        if st == _lib.COLL_OK and self._lib.coll_req_wire_bytes(p.req, ctypes.byref(sent),
                                                                ctypes.byref(dense)) == 0:
            p.future.wire_bytes, p.future.dense_bytes = sent.value, dense.value
        self._lib.coll_req_free(p.req)
        if st == _lib.COLL_OK:
            return True, p.result
        return False, make_error(st, detail, p.future.operation)
