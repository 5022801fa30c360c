"""3D-parallel groups: the tensor-, pipeline- and data-parallel communicators of a layout.

``collective.groups(comm, tp=2, pp=2, dp=2)`` splits @comm (tp x pp x dp ranks) into the
groups of Megatron-LM's rank order ``"tp-dp-pp"`` (tp fastest, then dp, then pp, as
``megatron/core/parallel_state.py``) or another @order, and says which of them stay inside a
node::

    import collective
    with collective.Communicator() as world:
        g = collective.groups(world, tp=2, pp=2, dp=2)
        g.tp.allreduce(partial_sums)              # the tensor-parallel group
        g.pp.send(activations, g.coords.pp + 1)   # the next pipeline stage
        print(g.intra_node)                       # e.g. Dims(tp=True, pp=False, dp=True)

:func:`layout_group` gives the same groups without a communicator (a pure function).
"""

import collections
import ctypes

from . import _lib
from .errors import make_error

Dims = collections.namedtuple("Dims", "tp pp dp")
Dims.__doc__ = "A value per dimension of a layout: tensor, pipeline, data parallelism."



class Groups(collections.namedtuple("Groups", "tp pp dp coords intra_node")):
    """The groups of one rank (:func:`groups`): its tp, pp and dp Communicators, its
    coordinates in each (a Dims of ranks) and whether each group lies on one node (a Dims of
    bools)."""

    __slots__ = ()

    def close(self):
        """Close the three communicators."""
        for c in (self.tp, self.pp, self.dp):
            c.close()


_DIMS = {"tp": 0, "pp": 1, "dp": 2}


def _layout(lib, tp, pp, dp, order):
    layout = _lib.Layout()
    st = lib.coll_layout_init(ctypes.byref(layout), int(tp), int(pp), int(dp),
                              None if order is None else order.encode())
    if st != _lib.COLL_OK:
        raise ValueError("tp=%r pp=%r dp=%r order=%r is not a layout (sizes >= 1, an order "
                         "such as 'tp-dp-pp')" % (tp, pp, dp, order))
    return layout


def layout_group(rank, dim, tp=1, pp=1, dp=1, order="tp-dp-pp"):
    """The ranks of the group of dimension @dim ("tp", "pp" or "dp") that holds @rank in the
    layout, in group rank order, and the group's index among that dimension's groups:
    ``(ranks, index)``. Pure (``coll_layout_group``)."""
    lib = _lib.load()
    layout = _layout(lib, tp, pp, dp, order)
    if dim not in _DIMS:
        raise ValueError("dim %r is not one of tp, pp, dp" % (dim,))
    ranks = (ctypes.c_int * layout.size[_DIMS[dim]])()
    color = ctypes.c_int()
    if lib.coll_layout_group(ctypes.byref(layout), _DIMS[dim], int(rank), ranks,
                             ctypes.byref(color)) != _lib.COLL_OK:
        raise ValueError("rank %r is not in 0..%d" % (rank, tp * pp * dp - 1))
    return list(ranks), color.value


def groups(comm, tp=1, pp=1, dp=1, order="tp-dp-pp"):
    """Split @comm into the tp, pp and dp groups of the layout (three :meth:`Communicator.split`
    calls, collective over @comm); returns :class:`Groups`. Raises ValueError when tp x pp x dp
    is not @comm's size (on every rank alike), CollectiveError when a split fails."""
    lib = comm._lib
    layout = _layout(lib, tp, pp, dp, order)
    if tp * pp * dp != comm.world_size:
        raise ValueError("tp=%d x pp=%d x dp=%d is not the communicator's %d ranks"
                         % (tp, pp, dp, comm.world_size))
    coords = (ctypes.c_int * 3)()
    if lib.coll_layout_coords(ctypes.byref(layout), comm.rank, coords) != _lib.COLL_OK:
        raise make_error(_lib.COLL_ERR_INVALID, "rank %d outside the layout" % comm.rank,
                         "coll_layout_coords")
    made = []
    try:
        for name in ("tp", "pp", "dp"):
            _, color = layout_group(comm.rank, name, tp, pp, dp, order)
            made.append(comm.split(color, coords[_DIMS[name]]))
    except Exception:
        for c in made:
            c.close()
        raise
    return Groups(*made, coords=Dims(*coords),
                  intra_node=Dims(*(c.node_count == 1 for c in made)))
