#!/usr/bin/env python3
"""The operations the "collectived" torch backend composes of the library's collectives and
messages (python/torch_backend: coalesced.cpp, sparse.cpp, monitored_barrier.cpp,
anysource.cpp) and its all-to-alls, each checked against values computed here from the inputs
every rank knows the others used:
allreduce_coalesced, all_gather_coalesced, sparse allreduce, recv from any source,
monitored_barrier, and the native all_to_all and all_to_all_single (alltoall.cpp, one
coll_alltoallv_async() each); a mismatch (ranks cutting the same total into different tensors)
fails on every rank without writing, an all-to-all whose ranks disagree on a pair's block or on
the dtype (even of one width) fails on every rank without writing, bad arguments raise before
anything is submitted, and a monitored_barrier names the ranks that did not come.

collective-launch runs this as every rank (ctest: 1x2, 2x2 and 4x1). Every test issues the same
operations on every rank and asserts only after its last one. The failing cases run in groups
of their own (each group is a job: its failure leaves the world group working).
"""

import datetime
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import common  # noqa: E402
import torch_common  # noqa: E402

torch, dist = torch_common.require_backend()

R = W = None
SHORT = datetime.timedelta(seconds=3)  # monitored_barrier's timeout where a rank stays away


def inputs(rank, seed=0):
    """Rank @rank's list for the coalesced operations: three shapes, one of them empty."""
    sizes = [(2, 3), (0,), (5,)]
    return [(torch.arange(torch.Size(s).numel(), dtype=torch.float32).view(s) * (rank + 1)
             + seed) for s in sizes]


class Checks:
    """Collects failures during a test; check() asserts them all at its end."""

    def __init__(self, case):
        self.case = case
        self.failed = []

    def equal(self, what, actual, expected):
        if not (actual.dtype == expected.dtype and actual.shape == expected.shape
                and torch.equal(actual, expected)):
            self.failed.append("%s: got %s, expected %s" % (what, actual, expected))

    def raises(self, what, call, text, *more):
        """@call raises RuntimeError whose message holds @text (and each of @more)."""
        try:
            call()
            self.failed.append("%s: no error" % what)
        except RuntimeError as e:
            for t in (text,) + more:
                if t not in str(e):
                    self.failed.append("%s: message %r lacks %r" % (what, str(e), t))

    def check(self):
        self.case.assertEqual(self.failed, [], "rank %d" % R)


class ComposedTest(unittest.TestCase):
    def test_allreduce_coalesced(self):
        c = Checks(self)
        for op, fold in ((dist.ReduceOp.SUM, sum), (dist.ReduceOp.MAX, max)):
            ts = inputs(R, seed=1)
            dist.all_reduce_coalesced(ts, op=op)
            for i, t in enumerate(ts):
                want = inputs(0, seed=1)[i]
                for r in range(1, W):
                    want = (want + inputs(r, seed=1)[i] if fold is sum
                            else torch.maximum(want, inputs(r, seed=1)[i]))
                c.equal("%s tensor %d" % (op, i), t, want)
        c.check()

    def test_all_gather_coalesced(self):
        c = Checks(self)
        outs = [[torch.full(t.shape, -1.0) for t in inputs(R)] for _ in range(W)]
        dist.all_gather_coalesced(outs, inputs(R))
        for r in range(W):
            for i, t in enumerate(outs[r]):
                c.equal("rank %d tensor %d" % (r, i), t, inputs(r)[i])
        c.check()

    def test_sparse_allreduce(self):
        # Rank r has r + 1 nonzero rows (of 2 dense values) among 6, some shared with others.
        c = Checks(self)

        def dense(r):
            d = torch.zeros(6, 2, dtype=torch.float64)
            for k in range(r + 1):
                d[(k * 2 + r) % 6] += torch.tensor([k + 1.0, r + 1.0])
            return d

        t = dense(R).to_sparse(1)
        dist.all_reduce(t)
        c.equal("sum", t.to_dense(), sum(dense(r) for r in range(W)))
        c.equal("still sparse", torch.tensor(t.is_sparse), torch.tensor(True))
        # Rank 1's rows are longer: every rank raises after the sizes, naming the first rank
        # whose tensor differs from its own.
        t = torch.ones(6, 3 if R == 1 else 2).to_sparse(1)
        c.raises("sizes differ", lambda: dist.all_reduce(t),
                 "sparse allreduce: rank %d has" % (0 if R == 1 else 1))
        c.equal("unwritten", t.to_dense(), torch.ones(6, 3 if R == 1 else 2))
        t = torch.ones(3)  # both all-gathers' keys were taken on every rank: still in step
        dist.all_reduce(t)
        c.equal("after", t, torch.full((3,), float(W)))
        c.check()

    def test_recv_any_source(self):
        # Every rank but the last sends the last two messages of its rank; the last receives
        # them from any source, then once from rank 0 by name. That message follows the last
        # rank's word that its any-source receives are done: sent earlier, any of them could
        # take it, as MPI's would.
        # A group of its own: the receives it leaves posted for the next message of the
        # senders that came second go with it.
        c = Checks(self)
        g, last = dist.new_group(), W - 1
        if R != last:
            dist.send(torch.full((4,), float(R)), last, group=g, tag=3)
            dist.send(torch.full((4,), float(R) + 0.5), last, group=g, tag=3)
            if R == 0:
                dist.recv(torch.zeros(1), last, group=g, tag=4)
                dist.send(torch.full((4,), 100.0), last, group=g, tag=3)
        else:
            seen = []
            for _ in range(2 * last):
                t = torch.zeros(4)
                work = dist.irecv(t, group=g, tag=3)
                work.wait()
                src, v = work._source_rank(), t[0].item()
                seen.append((src, v))
                c.equal("from %d" % src, t, torch.full((4,), v))
            dist.send(torch.zeros(1), 0, group=g, tag=4)
            t = torch.zeros(4)
            dist.recv(t, src=0, group=g, tag=3)
            c.equal("by name after", t, torch.full((4,), 100.0))
            for r in range(last):
                got = [v for s, v in seen if s == r]
                c.equal("rank %d in order" % r, torch.tensor(got), torch.tensor([r, r + 0.5]))
        dist.barrier()
        dist.destroy_process_group(g)
        c.check()

    def test_mismatch_fails_every_rank_unwritten(self):
        # The same 5 elements cut as [2 + R, 3 - R]: counts differ, totals agree.
        c = Checks(self)
        g = dist.new_group()
        ts = [torch.ones(2 + R % 2), torch.ones(3 - R % 2)]
        c.raises("allreduce_coalesced", lambda: dist.all_reduce_coalesced(ts, group=g),
                 "COLL_ERR_")
        c.equal("unwritten 0", ts[0], torch.ones(2 + R % 2))
        c.equal("unwritten 1", ts[1], torch.ones(3 - R % 2))
        g = dist.new_group()
        outs = [[torch.zeros(2 + R % 2), torch.zeros(3 - R % 2)] for _ in range(W)]
        c.raises("all_gather_coalesced",
                 lambda: dist.all_gather_coalesced(outs, [torch.ones(2 + R % 2),
                                                          torch.ones(3 - R % 2)], group=g),
                 "COLL_ERR_")
        c.equal("outputs unwritten", torch.cat([torch.cat(o) for o in outs]), torch.zeros(5 * W))
        c.check()

    def test_bad_arguments_submit_nothing(self):
        c = Checks(self)
        c.raises("output lists", lambda: dist.all_gather_coalesced(
            [[torch.zeros(2)]] * (W + 1), [torch.ones(2)]), "output lists; the group has")
        c.raises("list lengths", lambda: dist.all_gather_coalesced(
            [[torch.zeros(2), torch.zeros(1)]] * W, [torch.ones(2)]), "has 2 tensors where")
        c.raises("dtypes", lambda: dist.group.WORLD.allreduce_coalesced(  # past torch's check
            [torch.ones(2), torch.ones(2, dtype=torch.float64)],
            dist.AllreduceCoalescedOptions()), "one operation carries one dtype")
        c.raises("empty list", lambda: dist.all_reduce_coalesced([]), "non-empty list")
        c.raises("sparse MAX", lambda: dist.all_reduce(
            torch.ones(3).to_sparse(), op=dist.ReduceOp.MAX), "sums (ReduceOp.SUM) only")
        t = torch.ones(3)  # nothing was submitted: the keys still agree
        dist.all_reduce(t)
        c.equal("after the refusals", t, torch.full((3,), float(W)))
        c.check()

    def test_monitored_barrier(self):
        c = Checks(self)
        g = dist.new_group()
        # Everyone comes: the whole wait of a test, so that a loaded machine cannot make a
        # present rank late. Where a rank stays away, the present ones meet first (a group of
        # their own), so only the absent one can miss SHORT.
        g.monitored_barrier(torch_common.TIMEOUT)
        g.monitored_barrier(torch_common.TIMEOUT, wait_all_ranks=True)
        present = dist.new_group([r for r in range(W) if r != 1])
        present3 = dist.new_group([r for r in range(W) if r not in (1, 3)])
        # Rank 1 stays away: rank 0 names it, the others hear the job ended.
        if R != 1:
            dist.barrier(group=present)
            c.raises("rank 1 away", lambda: g.monitored_barrier(SHORT),
                     "[Rank 0]: Rank 1 failed to pass monitoredBarrier in 3000 ms" if R == 0
                     else "Rank %d successfully reached monitoredBarrier" % R)
        dist.barrier()
        if R == 1:  # it comes late, to a job rank 0 ended with that message
            c.raises("late", lambda: g.monitored_barrier(SHORT), "failed to pass monitoredBarrier")
        if W > 2:  # every absent rank named at once
            g = dist.new_group()
            if R not in (1, 3):
                dist.barrier(group=present3)
                c.raises("ranks 1 and 3 away", lambda: g.monitored_barrier(
                    SHORT, wait_all_ranks=True),
                    "[Rank 0]: Ranks 1, 3 failed to pass" if R == 0 else "successfully reached")
        g = dist.new_group()  # no time at all: rank 0 says so before waiting for anyone
        if R == 0:
            c.raises("no time", lambda: g.monitored_barrier(datetime.timedelta(0)),
                     "Rank 0 timed out in monitoredBarrier after 0 ms.\nNo ranks successfully")
        dist.barrier()
        c.check()


def rows(i, j):
    """The rows rank @i sends rank @j in the unequal all-to-alls: 0, 1 or 2 (empty blocks too)."""
    return (i + 2 * j) % 3


def a2a_input(i, splits, width=3):
    """Rank @i's all_to_all_single input: @splits rows per destination, values naming rank,
    row and column."""
    n = sum(splits)
    return (torch.arange(n * width, dtype=torch.int64).view(n, width) + 1000 * (i + 1))


def a2a_expected(splits_of, width=3):
    """What rank R receives: block R of every rank i's input, cut by @splits_of(i)."""
    blocks = []
    for i in range(W):
        splits = splits_of(i)
        at = sum(splits[:R])
        blocks.append(a2a_input(i, splits, width)[at:at + splits[R]])
    return torch.cat(blocks)


class AllToAllTest(unittest.TestCase):
    def test_all_to_all_single(self):
        c = Checks(self)
        equal = [2] * W
        out = torch.full((2 * W, 3), -1, dtype=torch.int64)
        dist.all_to_all_single(out, a2a_input(R, equal))
        c.equal("equal splits", out, a2a_expected(lambda i: equal))
        mine, theirs = [rows(R, j) for j in range(W)], [rows(i, R) for i in range(W)]
        out = torch.full((sum(theirs), 3), -1, dtype=torch.int64)
        work = dist.all_to_all_single(out, a2a_input(R, mine), output_split_sizes=theirs,
                                      input_split_sizes=mine, async_op=True)
        work.wait()
        c.equal("unequal splits", out, a2a_expected(lambda i: [rows(i, j) for j in range(W)]))
        c.check()

    def test_all_to_all(self):
        # Rank i sends rank j rows(i, j) + 1 float64 elements of value 100 i + j, into
        # non-contiguous outputs.
        c = Checks(self)
        ins = [torch.full((rows(R, j) + 1,), 100.0 * R + j, dtype=torch.float64)
               for j in range(W)]
        outs = [torch.zeros(2 * (rows(i, R) + 1), dtype=torch.float64)[::2] for i in range(W)]
        dist.all_to_all(outs, ins)
        for i in range(W):
            c.equal("from rank %d" % i, outs[i],
                    torch.full((rows(i, R) + 1,), 100.0 * i + R, dtype=torch.float64))
        c.check()

    def test_disagreement_fails_every_rank_unwritten(self):
        # Rank 1 expects one row from rank 0 where rank 0 sends two: every rank fails naming
        # that pair (in elements: 2 rows of 3 against 1), no output written. Each case in a
        # group of its own (its failure ends that group's job, not the world's).
        c = Checks(self)
        g = dist.new_group()
        splits = [2] * W
        theirs = [1] + splits[1:] if R == 1 else splits
        out = torch.full((sum(theirs), 3), -1, dtype=torch.int64)
        c.raises("splits", lambda: dist.all_to_all_single(
            out, a2a_input(R, splits), output_split_sizes=theirs, input_split_sizes=splits,
            group=g), "COLL_ERR_MISMATCH", "rank 0 sends 6 elements to rank 1, which expects 3")
        c.equal("unwritten", out, torch.full((sum(theirs), 3), -1, dtype=torch.int64))
        # Rank 1 gives int32 where the others give float32, the same width: the dtypes differ
        # in the daemons' descriptors, so every rank fails (a composed exchange of bytes could
        # not tell them apart).
        g = dist.new_group()
        dt = torch.int32 if R == 1 else torch.float32
        outs = [torch.full((2,), -1, dtype=dt) for _ in range(W)]
        c.raises("dtype", lambda: dist.all_to_all(outs, [torch.ones(2, dtype=dt)] * W, group=g),
                 "COLL_ERR_MISMATCH", "int32", "float32")
        c.equal("unwritten", torch.cat(outs), torch.full((2 * W,), -1, dtype=dt))
        out = torch.full((2 * W, 3), -1, dtype=torch.int64)  # the world's job goes on
        dist.all_to_all_single(out, a2a_input(R, splits))
        c.equal("after", out, a2a_expected(lambda i: splits))
        c.check()

    def test_bad_arguments_submit_nothing(self):
        c = Checks(self)
        t = torch.zeros(2 * W, 3)
        c.raises("split sum", lambda: dist.all_to_all_single(
            t, torch.ones(2 * W, 3), input_split_sizes=[1] * W),
            "input split sizes sum to %d, not to the input's first dimension (%d)" % (W, 2 * W))
        c.raises("split count", lambda: dist.all_to_all_single(
            t, torch.ones(2 * W, 3), output_split_sizes=[2 * W]),
            "1 output split sizes; the group has %d ranks" % W)
        c.raises("list length", lambda: dist.all_to_all(
            [torch.zeros(2)] * W, [torch.ones(2)] * (W + 1)),
            "%d input tensors; the group has %d ranks" % (W + 1, W))
        c.raises("mixed dtypes", lambda: dist.group.WORLD.alltoall(  # past torch's check
            [torch.zeros(2)] * W, [torch.ones(2, dtype=torch.float64)] + [torch.ones(2)] * (W - 1),
            dist.AllToAllOptions()), "one operation carries one dtype")
        out = torch.full((2 * W, 3), -1, dtype=torch.int64)  # nothing was submitted
        dist.all_to_all_single(out, a2a_input(R, [2] * W))
        c.equal("after the refusals", out, a2a_expected(lambda i: [2] * W))
        c.check()


def main():
    global R, W
    dist.init_process_group("collectived", timeout=torch_common.TIMEOUT)
    R, W = dist.get_rank(), dist.get_world_size()
    status = common.run_tests(__name__)
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
