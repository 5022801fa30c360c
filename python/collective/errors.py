"""The exception raised for every libcollective error status."""

from . import _lib


class CollectiveError(Exception):
    """A libcollective call or operation failed.

    Attributes:
        status (int): the ``coll_status_t`` value, negative (e.g. -1002).
        name (str): its symbolic name from ``coll_err_name``, e.g. ``"COLL_ERR_MISMATCH"``.
        strerror (str): its text from ``coll_strerror``.
        detail (str): ``coll_comm_last_error`` of the communicator when the error was seen
            (which rank, which sizes), or ``""``. Communicators keep one such message, so with
            several threads failing at once it may describe a neighbouring failure.

    ``str(e)`` is ``"<name>: <strerror>: <detail>"``. :class:`CollectiveTimeoutError` is the
    subclass for ``COLL_ERR_TIMEDOUT``.
    """

    def __init__(self, status, detail="", context=""):
        lib = _lib.load()
        self.status = int(status)
        self.name = lib.coll_err_name(self.status).decode()
        self.strerror = lib.coll_strerror(self.status).decode()
        self.detail = detail or ""
        parts = [p for p in (context, self.name, self.strerror, self.detail) if p]
        super().__init__(": ".join(parts))


class CollectiveTimeoutError(CollectiveError, TimeoutError):
    """``COLL_ERR_TIMEDOUT``: a rendezvous or an operation did not finish in time."""


def make_error(status, detail="", context=""):
    """The exception for @status: a :class:`CollectiveTimeoutError` or a
    :class:`CollectiveError`."""
    cls = CollectiveTimeoutError if status == _lib.COLL_ERR_TIMEDOUT else CollectiveError
    return cls(status, detail, context)
