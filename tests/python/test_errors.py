#!/usr/bin/env python3
"""Python package, one rank of a 1x2 (or larger) job: a failed job surfaces as exceptions.

The last rank submits an allreduce of another size than the others: every rank's future must
fail with COLL_ERR_MISMATCH, carrying coll_comm_last_error's message with both sizes, its
buffer untouched; the job is then failed, so the next operation fails too (COLL_ERR_JOB or
the mismatch again) instead of hanging, also through a torch future. The daemons log errors
here: that is expected.

Exit status: 0 all passed, 1 a failure, 77 (skip) when numpy is missing.
"""

import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

np = common.require("numpy")
torch = common.optional("torch")
import collective  # noqa: E402
from collective import CollectiveError  # noqa: E402

T = 60.0
COUNT, OTHER = 100000, 150001  # the last rank's count


class Mismatch(unittest.TestCase):
    def test_mismatch_then_failed_job(self):
        with collective.Communicator(op_timeout=T) as comm:
            n = OTHER if comm.rank == comm.world_size - 1 else COUNT
            x = comm.empty(n, "float32")
            x[:] = comm.rank
            t = comm.empty_tensor(10) if torch is not None else None  # the failed job
            # allocates nothing any more
            with self.assertRaises(CollectiveError) as cm:
                comm.allreduce(x).result(T)
            e = cm.exception
            self.assertEqual(e.name, "COLL_ERR_MISMATCH")
            self.assertEqual(e.status, -1002)
            self.assertIn(str(COUNT), e.detail)
            self.assertIn(str(OTHER), e.detail)
            self.assertIn("allreduce", str(e))
            np.testing.assert_array_equal(x, comm.rank)

            with self.assertRaises(CollectiveError) as cm:
                comm.barrier().result(T)
            self.assertIn(cm.exception.name, ("COLL_ERR_JOB", "COLL_ERR_MISMATCH"))
            if t is not None:
                with self.assertRaises(CollectiveError):
                    comm.allreduce(t).as_torch_future().wait()


if __name__ == "__main__":
    sys.exit(common.run_tests(__name__))
