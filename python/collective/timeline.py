"""The timeline of COLL_TIMELINE from Python: flushed on a timer and at exit, and user spans.

libcollective writes a rank's timeline (a Chrome trace, see ``collective_bucketer.h``) when
its buffer fills, when an event comes at least a second after the last write, and when the
communicator is destroyed. A Python communicator is destroyed only once no pool array is left,
which at interpreter exit is often never; so the events of a short run, or of its last second,
would stay in the buffer. Here every communicator with a timeline gets a thread that flushes
it every :data:`FLUSH_S` seconds, and every live one is flushed at exit.
"""

import atexit
import threading
import time
import weakref

# How often a communicator's timeline is written while it lives (seconds).
FLUSH_S = 1.0

# The communicators (their Native handles) with a timeline, to flush at exit. A Native lives
# as long as a pool array refers to it, however the Communicator went.
_live = weakref.WeakSet()
_live_lock = threading.Lock()


def _flush(native):
    """``coll_timeline_flush`` of @native, unless it was destroyed."""
    with native._lock:
        if native.ptr is not None:
            native.check(native.lib.coll_timeline_flush(native.ptr), "coll_timeline_flush")


class Timeline:
    """The timeline of one communicator (its ``Native`` handle). Thread-safe."""

    def __init__(self, native):
        self._native = native
        self._stop = threading.Event()
        self.enabled = bool(native.lib.coll_timeline_enabled(native.handle()))
        if not self.enabled:
            return
        with _live_lock:
            _live.add(native)
        # The thread holds only a weak reference: it never keeps the communicator alive.
        threading.Thread(target=_flush_loop, args=(weakref.ref(native), self._stop),
                         daemon=True, name="collective-timeline").start()

    def flush(self):
        """Write the buffered events now (``coll_timeline_flush``); the file is complete JSON
        afterwards. A no-op without a timeline or once the communicator is gone. Raises
        :class:`~collective.CollectiveError` (COLL_ERR_IO) when writing failed."""
        _flush(self._native)

    def span(self, track, name, begin_ns, end_ns):
        """Add a span of the caller's (``coll_timeline_span``): row @track (str, at most 31
        characters kept), label @name (47), from @begin_ns to @end_ns, ``time.monotonic_ns()``
        values (the library's clock). Raises ValueError when @end_ns < @begin_ns."""
        if end_ns < begin_ns:
            raise ValueError("span %r ends (%d) before it begins (%d)" % (name, end_ns,
                                                                           begin_ns))
        self._native.call(self._native.lib.coll_timeline_span, "coll_timeline_span",
                          track.encode(), name.encode(), int(begin_ns), int(end_ns))

    def stop(self):
        """End the flushing thread (the communicator is being closed; the exit still flushes
        what its remaining pool arrays let live)."""
        self._stop.set()


def _flush_loop(ref, stop):
    while not stop.wait(FLUSH_S):
        native = ref()
        if native is None:
            return
        try:
            _flush(native)
        except Exception:  # reported once by the library, which then switches it off
            return
        del native


@atexit.register
def _flush_all():
    with _live_lock:
        live = list(_live)
    for native in live:
        try:
            _flush(native)
        except Exception:  # at exit there is no one left to tell
            pass


class Span:
    """``with comm.span("step", "forward"):`` records the block as a span of the timeline."""

    def __init__(self, timeline, track, name):
        self._timeline, self._track, self._name = timeline, track, name
        self._begin = 0

    def __enter__(self):
        self._begin = time.monotonic_ns()
        return self

    def __exit__(self, *exc):
        if self._timeline.enabled:
            self._timeline.span(self._track, self._name, self._begin, time.monotonic_ns())
