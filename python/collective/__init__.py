"""collective: Python bindings of libcollective, the client library of collectived.

Python over ctypes. A rank joins its job, allocates numpy arrays or torch tensors in the job's
shared pool (zero copy: the daemon reduces them in place) and submits collectives that return
futures::

    import collective
    with collective.Communicator() as comm:          # rank, world size, job from COLL_*
        grads = comm.zeros(1 << 20, "float32")      # a numpy array in the pool
        grads[:] = 1.0
        fut = comm.allreduce(grads, op="avg")        # returns at once
        fut.result(timeout=60)                       # grads now holds the average

Modules: :mod:`collective.comm` (Communicator), :mod:`collective.progress` (futures),
:mod:`collective.pool` (pool memory), :mod:`collective.types`, :mod:`collective.errors`,
:mod:`collective.timeline` (COLL_TIMELINE flushed every second and at exit, user spans),
:mod:`collective.groups` (tp/pp/dp groups of a 3D-parallel layout, ``Communicator.split``),
:mod:`collective.ddp` (PyTorch DDP communication hook; imports torch),
:mod:`collective.optim` (ServiceOptimizer: a torch.optim-style optimizer run by the daemons'
parameter service; imports torch),
:mod:`collective.torch_backend` (the torch.distributed backend "collectived", over the C++
extension ``collective._torch_pg``; imports torch).

libcollective is found through $COLLECTIVE_LIB, next to the package in the build tree, or the
system loader (see :mod:`collective._lib`).

Importing the package registers the torch.distributed backend "collectived" (at once when
torch.distributed is loaded, else when it gets imported, see :mod:`collective_torch_autoload`,
which lies beside the package), from any prefix: the ``collective-torch.pth`` beside it does the
same for scripts that do not import the package, but Python reads ``.pth`` files only in a
site directory, not in a ``PYTHONPATH`` entry.
"""

import collective_torch_autoload

from ._lib import LibraryNotFoundError
from .comm import Communicator
from .errors import CollectiveError, CollectiveTimeoutError
from .groups import Dims, Groups, groups, layout_group
from .progress import Future, Timing
from .types import Algo, DType, Op

__version__ = "0.1.0"

collective_torch_autoload.install()

__all__ = ["Algo", "CollectiveError", "CollectiveTimeoutError", "Communicator", "DType", "Dims",
           "Future", "Groups", "LibraryNotFoundError", "Op", "Timing", "groups", "layout_group"]
