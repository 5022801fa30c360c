#!/usr/bin/env python3
"""Python package, groups, one rank of a job of 2 nodes x 2 ranks: Communicator.split
(ordering by key, None for no group, pool arrays through a group, closing in any order) and
collective.groups(tp=2, pp=2) (Megatron's order: tp on a node, pp across nodes), with an
allreduce in each group, pipeline send/recv between the stages and the pure layout_group()
against Megatron-LM's parallel_state.py example. Values are small integers (exact sums).
Exit status: 0 all passed, 1 a failure, 77 (skip) when numpy is missing.
"""

import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

np = common.require("numpy")
import collective  # noqa: E402

T = 60.0
comm = None


def setUpModule():
    global comm
    comm = collective.Communicator(op_timeout=T)


def tearDownModule():
    if comm is not None:
        comm.close()


class Split(unittest.TestCase):
    def test_reversed_order_and_group_arrays(self):
        g = comm.split(0, key=-comm.rank)
        self.assertEqual((g.rank, g.world_size), (comm.world_size - 1 - comm.rank,
                                                  comm.world_size))
        self.assertEqual([g.job_rank(r) for r in range(g.world_size)],
                         list(range(comm.world_size))[::-1])
        x = g.zeros(5, "int32")
        x[:] = comm.rank + 1
        g.allreduce(x).result(T)
        self.assertEqual(x.tolist(), [sum(range(1, comm.world_size + 1))] * 5)
        with self.assertRaises(ValueError):
            g.job_rank(comm.world_size)
        g.close()

    def test_no_group_and_parity(self):
        odd = comm.split(None if comm.rank % 2 else 1)
        self.assertEqual(odd is None, comm.rank % 2 == 1)
        if odd is not None:
            x = odd.zeros(1, "int64")
            x[0] = comm.rank
            odd.allreduce(x).result(T)
            self.assertEqual(int(x[0]), sum(range(0, comm.world_size, 2)))
            odd.close()


class Groups3D(unittest.TestCase):
    def test_megatron_example_pure(self):
        # parallel_state.py: 16 GPUs, tp 2, pp 4: tp [g0, g1], pp [g0, g4, g8, g12], dp [g0, g2]
        self.assertEqual(collective.layout_group(0, "tp", tp=2, pp=4, dp=2), ([0, 1], 0))
        self.assertEqual(collective.layout_group(8, "pp", tp=2, pp=4, dp=2)[0], [0, 4, 8, 12])
        self.assertEqual(collective.layout_group(13, "dp", tp=2, pp=4, dp=2)[0], [13, 15])
        self.assertEqual(collective.layout_group(5, "tp", 2, 2, 2, order="pp-tp-dp")[0], [5, 7])
        with self.assertRaises(ValueError):
            collective.layout_group(0, "tp", tp=2, pp=2, dp=2, order="tp-tp-pp")

    def test_tp_pp_groups(self):
        if comm.world_size != 4 or comm.local_size != 2:
            self.skipTest("needs 2 nodes x 2 ranks")
        g = collective.groups(comm, tp=2, pp=2)
        self.assertEqual(g.coords, collective.Dims(comm.rank % 2, comm.rank // 2, 0))
        self.assertEqual(g.intra_node, collective.Dims(True, False, True))
        x = g.tp.zeros(3, "float32")
        x[:] = comm.rank
        g.tp.allreduce(x).result(T)
        self.assertEqual(x.tolist(), [float(comm.rank // 2 * 4 + 1)] * 3)
        act = g.pp.zeros(7, "float32")
        if g.coords.pp == 0:
            act[:] = 10 + comm.rank
            g.pp.send(act, 1, key=4).result(T)
        else:
            g.pp.recv(act, 0, key=4).result(T)
            self.assertEqual(act.tolist(), [float(10 + comm.rank - 2)] * 7)
        comm.barrier().result(T)
        g.close()
        with self.assertRaises(ValueError):
            collective.groups(comm, tp=3)


if __name__ == "__main__":
    sys.exit(common.run_tests(__name__))
