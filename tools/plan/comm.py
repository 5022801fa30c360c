"""Communication: the cost of collectives and point-to-point sends (an alpha-beta ring model),
the rank groups of a layout, and which links each group crosses.

Rank order: a layout's ranks are numbered with the first dimension of the order fastest, as
Megatron-LM's megatron/core/parallel_state.py does with its default order "tp-dp-pp" (tp fastest,
then dp, then pp). Ranks r of one node are r // gpus_per_node, as a launcher numbers them.
"""

from .config import DIMS


def allreduce_time(nbytes, n, bw, latency):
    """Ring allreduce of nbytes over n ranks: 2(n-1)/n * bytes / bw + 2(n-1) latencies (a
    reduce-scatter then an all-gather, n-1 steps each)."""
    if n <= 1:
        return 0.0
    return 2.0 * (n - 1) / n * nbytes / bw + 2.0 * (n - 1) * latency


def reduce_scatter_time(nbytes, n, bw, latency):
    """Ring reduce-scatter (or all-gather) of nbytes in all: (n-1)/n * bytes / bw + (n-1)
    latencies."""
    if n <= 1:
        return 0.0
    return (n - 1.0) / n * nbytes / bw + (n - 1.0) * latency


all_gather_time = reduce_scatter_time


def p2p_time(nbytes, bw, latency):
    """One send of nbytes to a peer: latency + bytes / bw."""
    return latency + nbytes / bw


def rank_of(coords, sizes, order):
    """Global rank of coordinates {'tp': i, 'dp': j, 'pp': k}; order 'tp-dp-pp' makes tp the
    fastest-varying coordinate, then dp, then pp."""
    rank, stride = 0, 1
    for dim in order.split("-"):
        rank += coords[dim] * stride
        stride *= sizes[dim]
    return rank


def rank_groups(layout, order, dim):
    """The groups of dimension dim ('tp', 'pp' or 'dp'): ranks that share the two other
    coordinates, each listed by its coordinate along dim; the groups sorted by first rank."""
    sizes = layout._asdict()
    a, b = [d for d in DIMS if d != dim]
    groups = []
    for i in range(sizes[a]):
        for j in range(sizes[b]):
            groups.append([rank_of({dim: k, a: i, b: j}, sizes, order)
                           for k in range(sizes[dim])])
    return sorted(groups)


def node_of(rank, gpus_per_node):
    return rank // gpus_per_node


def crossing_groups(groups, gpus_per_node):
    """How many groups have ranks on more than one node."""
    return sum(1 for g in groups if len({node_of(r, gpus_per_node) for r in g}) > 1)


def crossing_hops(groups, gpus_per_node):
    """How many consecutive pairs (stage i, stage i+1) of pipeline groups lie on two nodes."""
    return sum(1 for g in groups for r, s in zip(g, g[1:])
               if node_of(r, gpus_per_node) != node_of(s, gpus_per_node))


def dimension_links(layout, cluster):
    """{dim: {'size', 'groups', 'crossing', 'link'}}: a dimension's link is 'none' when its size
    is 1, 'intra' when every group (for pp: every hop between consecutive stages) stays inside a
    node, else 'inter' (the slowest group sets the pace)."""
    out = {}
    for dim in DIMS:
        size = getattr(layout, dim)
        groups = rank_groups(layout, cluster.order, dim)
        count = (crossing_hops if dim == "pp" else crossing_groups)(groups, cluster.gpus_per_node)
        link = "none" if size == 1 else ("inter" if count else "intra")
        out[dim] = {"size": size, "groups": len(groups), "crossing": count, "link": link}
    return out


def link_speed(cluster, link):
    """(bytes/s, seconds per message) of a link kind."""
    if link == "inter":
        return cluster.inter_bw, cluster.inter_latency
    return cluster.intra_bw, cluster.intra_latency
