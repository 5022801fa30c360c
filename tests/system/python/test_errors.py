#!/usr/bin/env python3
"""Python package, one rank of a 1x2 (or larger) job: a failed job surfaces as exceptions.

The last rank submits an allreduce of another size than the others: every rank's future must
fail with COLL_ERR_MISMATCH, carrying coll_comm_last_error's message with both sizes, its
buffer untouched; the job is then failed, so the next operation fails too (COLL_ERR_JOB or
the mismatch again) instead of hanging, also through a torch future. A submission refused by
one rank's library (a buffer outside the pool, a root that is no rank) fails the job on every
rank at once: that rank gets its code, every other rank COLL_ERR_JOB with that rank's reason;
each case in a job of its own. The daemons log errors
here: that is expected.

Exit status: 0 all passed, 1 a failure, 77 (skip) when numpy is missing.
"""

import os
import sys
import time
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


def job_of_its_own(name):
    return collective.Communicator(job="%s-%s" % (os.environ["COLL_JOB"], name), op_timeout=T)


class Refusals(unittest.TestCase):
    def test_buffer_outside_the_pool_fails_the_job_everywhere(self):
        with job_of_its_own("pool") as comm:
            last = comm.world_size - 1
            if comm.rank == last:
                with self.assertRaises(CollectiveError) as cm:
                    comm.allreduce(np.zeros(10, np.float32))
                e = cm.exception
                self.assertEqual(e.name, "COLL_ERR_NOT_IN_POOL")
                self.assertEqual(e.status, -1007)
                self.assertEqual(e.strerror, "buffer is not inside the job's memory pool")
                self.assertIn("coll_mem_alloc", e.detail)
                self.assertIn("COLL_ERR_NOT_IN_POOL", str(e))
            else:
                t0 = time.monotonic()
                with self.assertRaises(CollectiveError) as cm:
                    comm.allreduce(comm.empty(10)).result(T)
                self.assertLess(time.monotonic() - t0, 1.0)
                self.assertEqual(cm.exception.name, "COLL_ERR_JOB")
                self.assertIn("COLL_ERR_NOT_IN_POOL", cm.exception.detail)
                self.assertIn("rank %d" % last, cm.exception.detail)
                self.assertIn("coll_mem_alloc", cm.exception.detail)

    def test_invalid_root_fails_the_job_everywhere(self):
        with job_of_its_own("root") as comm:
            if comm.rank == 0:
                with self.assertRaises(CollectiveError) as cm:
                    comm.broadcast(comm.empty(4), root=comm.world_size)
                self.assertEqual(cm.exception.name, "COLL_ERR_INVALID")
                self.assertIn("root", cm.exception.detail)
            else:
                with self.assertRaises(CollectiveError) as cm:
                    comm.broadcast(comm.empty(4), root=0).result(T)
                self.assertEqual(cm.exception.name, "COLL_ERR_JOB")
                self.assertIn("rank 0", cm.exception.detail)

    def test_abort_ends_the_job_everywhere(self):
        with job_of_its_own("abort") as comm:
            if comm.rank == 0:
                comm.abort("loss is NaN at step 7")
            with self.assertRaises(CollectiveError) as cm:
                comm.allreduce(comm.empty(10)).result(T)
            self.assertEqual(cm.exception.name, "COLL_ERR_JOB")
            self.assertIn("rank 0", cm.exception.detail)
            self.assertIn("loss is NaN at step 7", cm.exception.detail)


if __name__ == "__main__":
    sys.exit(common.run_tests(__name__))
