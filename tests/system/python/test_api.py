#!/usr/bin/env python3
"""Python package, one rank of a small job (collective-launch runs it as every rank, e.g. 1x2
and 2x1): pool arrays are zero copy, every collective on numpy arrays and torch tensors, futures
(results, callbacks, torch futures, timeouts, no busy waiting), errors as exceptions, explicit
and garbage-collected frees, close.

Every rank runs the same tests in the same (alphabetical) order, so their collectives match.
Values are small integers: sums and averages are exact in every dtype, whatever the order.
Exit status: 0 all passed, 1 a failure, 77 (skip) when numpy is missing. Tests that need torch
are skipped, saying so, when it is missing.
"""

import concurrent.futures
import gc
import os
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

np = common.require("numpy")
torch = common.optional("torch")
import collective  # noqa: E402
from collective import CollectiveError, CollectiveTimeoutError  # noqa: E402

T = 60.0  # bound on every wait, seconds
NUMPY_DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int32", "int64"]
comm = None


def setUpModule():
    global comm
    comm = collective.Communicator(op_timeout=T)


def tearDownModule():
    if comm is not None:
        comm.close()


def needs_torch(cls_or_fn):
    return unittest.skipIf(torch is None, "torch is not installed (python3-torch)")(cls_or_fn)


class Attributes(unittest.TestCase):
    def test_rank_and_sizes_from_env(self):
        self.assertEqual(comm.rank, int(os.environ["COLL_RANK"]))
        self.assertEqual(comm.world_size, int(os.environ["COLL_WORLD_SIZE"]))
        self.assertEqual(comm.local_rank, int(os.environ["COLL_LOCAL_RANK"]))
        self.assertEqual(comm.local_size, int(os.environ["COLL_LOCAL_SIZE"]))
        self.assertIn("rank %d/%d" % (comm.rank, comm.world_size), repr(comm))


class ZeroCopy(unittest.TestCase):
    def test_writes_through_numpy_views_are_reduced(self):
        a = comm.zeros((4, 256), "float32")
        addr = a.__array_interface__["data"][0]
        view = a[1:3]                       # a view: the writes land in pool memory
        view[:] = comm.rank + 1
        a.reshape(-1)[-1] = 7
        out = comm.allreduce(a).result(T)
        self.assertIs(out, a)
        self.assertEqual(a.__array_interface__["data"][0], addr)
        w = comm.world_size
        np.testing.assert_array_equal(a[1:3], w * (w + 1) / 2)
        np.testing.assert_array_equal(a[0], 0)
        self.assertEqual(a[3, -1], 7 * w)

    @needs_torch
    def test_tensor_and_its_numpy_view_share_pool_memory(self):
        t = comm.zeros_tensor((8, 8))
        t.numpy()[:, 0] = comm.rank + 1     # written through numpy, reduced as the tensor
        comm.allreduce(t, op="max").result(T)
        self.assertTrue(torch.equal(t[:, 0], torch.full((8,), float(comm.world_size))))
        self.assertEqual(float(t[:, 1:].abs().sum()), 0.0)

    def test_empty_arrays(self):
        a = comm.empty(0)
        self.assertIs(comm.allreduce(a).result(T), a)
        self.assertEqual(comm.empty((3, 0, 2), "int8").shape, (3, 0, 2))


class Allreduce(unittest.TestCase):
    def test_ops(self):
        w, r = comm.world_size, comm.rank
        expect = {"sum": w * (w + 1) / 2, "avg": (w + 1) / 2, "prod": float(np.prod(
            np.arange(1, w + 1))), "min": 1, "max": w}
        for op, want in expect.items():
            a = comm.empty(1000, "float64")
            a[:] = r + 1
            comm.allreduce(a, op=op).result(T)
            np.testing.assert_array_equal(a, want, err_msg=op)

    def test_bitwise_ops_of_integers(self):
        i = np.arange(1000, dtype=np.int64)
        inputs = [(i * 2654435761 + q * 40503) ^ (i << q) for q in range(comm.world_size)]
        for op, fn in (("band", np.bitwise_and), ("bor", np.bitwise_or),
                       ("bxor", np.bitwise_xor)):
            a = comm.empty(1000, "int64")
            a[:] = inputs[comm.rank]
            comm.allreduce(a, op=op).result(T)
            np.testing.assert_array_equal(a, fn.reduce(inputs), err_msg=op)

    def test_numpy_dtypes_out_of_place(self):
        w = comm.world_size
        for dt in NUMPY_DTYPES:
            x = comm.empty(333, dt)
            x[:] = np.arange(333) % 5 + comm.rank
            out = comm.zeros(333, dt)
            self.assertIs(comm.allreduce(x, out, op="sum").result(T), out)
            want = (np.arange(333) % 5) * w + w * (w - 1) // 2
            np.testing.assert_array_equal(out, want.astype(dt), err_msg=dt)
            np.testing.assert_array_equal(x, (np.arange(333) % 5 + comm.rank).astype(dt))

    def test_bfloat16_as_uint16(self):
        x = comm.empty(64, "bfloat16")
        self.assertEqual(x.dtype, np.uint16)
        bits = np.array([comm.rank + 1], np.float32).view(np.uint32) >> 16
        x[:] = bits[0]                      # bfloat16 of rank + 1: the top half of float32
        comm.allreduce(x, op="max", dtype="bfloat16").result(T)
        got = (x.astype(np.uint32) << 16).view(np.float32)
        np.testing.assert_array_equal(got, comm.world_size)

    @needs_torch
    def test_torch_dtypes_avg(self):
        w = comm.world_size
        for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                   torch.int64):
            t = comm.empty_tensor(100, dt)
            t.fill_(2 * w * (comm.rank + 1))   # the average, (w + 1) * w, is exact
            comm.allreduce(t, op="avg").result(T)
            self.assertTrue(torch.equal(t, torch.full((100,), (w + 1) * w, dtype=dt)), str(dt))

    def test_many_in_flight(self):
        arrays = [comm.empty(1 << k, "int32") for k in range(16)]
        for k, a in enumerate(arrays):
            a[:] = k + comm.rank
        futures = [comm.allreduce(a) for a in arrays]
        done, not_done = concurrent.futures.wait(futures, timeout=T)
        self.assertFalse(not_done)
        w = comm.world_size
        for k, a in enumerate(arrays):
            np.testing.assert_array_equal(a, k * w + w * (w - 1) // 2)

    def test_keys_match_operations_submitted_in_different_orders(self):
        a, b = comm.empty(10), comm.empty(100000)
        a[:], b[:] = 1, 2
        order = [(a, 11), (b, 12)]
        if comm.rank % 2:
            order.reverse()
        futures = [comm.allreduce(x, key=k) for x, k in order]
        for f in futures:
            f.result(T)
        np.testing.assert_array_equal(a, comm.world_size)
        np.testing.assert_array_equal(b, 2 * comm.world_size)


class Collectives(unittest.TestCase):
    def test_reduce_scatter(self):
        w, n = comm.world_size, 1001
        x = comm.empty(w * n, "int64")
        x[:] = np.arange(w * n) + comm.rank
        out = comm.empty(n, "int64")
        comm.reduce_scatter(x, out).result(T)
        block = np.arange(comm.rank * n, (comm.rank + 1) * n)
        np.testing.assert_array_equal(out, block * w + w * (w - 1) // 2)
        # In place: the default output is this rank's block of x.
        x[:] = 1
        inplace = comm.reduce_scatter(x, op="sum").result(T)
        self.assertEqual(inplace.shape, (n,))
        np.testing.assert_array_equal(inplace, w)
        np.testing.assert_array_equal(x[comm.rank * n:(comm.rank + 1) * n], w)

    def test_allgather(self):
        w, n = comm.world_size, 513
        x = comm.empty(n, "int32")
        x[:] = comm.rank
        out = comm.allgather(x).result(T)
        np.testing.assert_array_equal(out, np.repeat(np.arange(w), n))
        # In place: x is block r of the output.
        big = comm.zeros(w * n, "int32")
        mine = big[comm.rank * n:(comm.rank + 1) * n]
        mine[:] = 10 + comm.rank
        comm.allgather(mine, big).result(T)
        np.testing.assert_array_equal(big, np.repeat(np.arange(w) + 10, n))

    def test_broadcast_from_every_root(self):
        for root in range(comm.world_size):
            x = comm.empty(4099, "float32")
            x[:] = comm.rank * 100 + np.arange(4099) % 7
            comm.broadcast(x, root=root).result(T)
            np.testing.assert_array_equal(x, root * 100 + np.arange(4099) % 7)

    def test_reduce_to_last_rank(self):
        root = comm.world_size - 1
        x = comm.empty(300, "float32")
        x[:] = comm.rank + 1
        out = comm.zeros(300, "float32")
        comm.reduce(x, out, op="max", root=root).result(T)
        np.testing.assert_array_equal(out, comm.world_size if comm.rank == root else 0)

    def test_gather_to_every_root(self):
        w, n = comm.world_size, 1003
        for root in range(w):
            x = comm.empty(n, "int64")
            x[:] = np.arange(n) + 1000 * comm.rank
            f = comm.gather(x, root=root)
            out = f.result(T)
            self.assertEqual(f.algo, "direct" if comm.world_size > comm.local_size else "local")
            # Then in place at the root: its x is block root of the output.
            if comm.rank != root:
                self.assertIsNone(out)
                comm.gather(x, root=root).result(T)
                continue
            want = np.concatenate([np.arange(n) + 1000 * r for r in range(w)])
            np.testing.assert_array_equal(out, want)
            big = comm.zeros(w * n, "int64")
            big[root * n:(root + 1) * n] = 1000 * root + np.arange(n)
            comm.gather(big[root * n:(root + 1) * n], big, root=root).result(T)
            np.testing.assert_array_equal(big, want)

    def test_alltoallv(self):
        # Rank i sends rank j (i + 2 j) % 3 elements of value 100 i + j (some blocks empty),
        # packed, then again into an output with a gap after each block.
        w, me = comm.world_size, comm.rank
        send = [(me + 2 * j) % 3 for j in range(w)]
        recv = [(i + 2 * me) % 3 for i in range(w)]
        x = comm.empty(max(sum(send), 1), "float64")
        x[:sum(send)] = np.concatenate([np.full(n, 100.0 * me + j) for j, n in enumerate(send)])
        f = comm.alltoallv(x, send, recv)
        out = f.result(T)
        self.assertEqual(f.algo, "direct")
        want = np.concatenate([np.full(n, 100.0 * i + me) for i, n in enumerate(recv)])
        np.testing.assert_array_equal(out[:sum(recv)], want)
        gaps = comm.empty(sum(recv) + w, "float64")
        gaps[:] = -1.0
        rd = [sum(recv[:i]) + i for i in range(w)]
        comm.alltoallv(x, send, recv, gaps, rdispls=rd).result(T)
        for i in range(w):
            np.testing.assert_array_equal(gaps[rd[i]:rd[i] + recv[i]], 100.0 * i + me)
            self.assertEqual(gaps[rd[i] + recv[i]], -1.0)
        with self.assertRaises(ValueError):
            comm.alltoallv(x, send[:-1], recv)
        with self.assertRaises(ValueError):  # counts are integers, not truncated
            comm.alltoallv(x, [1.7] * w, recv)
        with self.assertRaises(ValueError):  # the receive blocks end past the given output
            comm.alltoallv(x, send, [n + 1 for n in recv], comm.empty(sum(recv), "float64"))
        with self.assertRaises(ValueError):  # the send blocks end past x
            comm.alltoallv(x, [n + 1 for n in send], recv)
        # Empty blocks touch nothing wherever they are: the default output ignores them.
        far = [sum(recv[:i]) if recv[i] else 1 << 40 for i in range(w)]
        out = comm.alltoallv(x, send, recv, rdispls=far).result(T)
        self.assertEqual(len(out), sum(recv))
        np.testing.assert_array_equal(out, want)

    def test_scatter_from_every_root(self):
        w, n = comm.world_size, 517
        for root in range(w):
            out = comm.zeros(n, "float32")
            x = None
            if comm.rank == root:
                x = comm.empty(w * n, "float32")
                x[:] = np.arange(w * n) % 1021 + root
            self.assertIs(comm.scatter(x, out, root=root).result(T), out)
            want = np.arange(comm.rank * n, (comm.rank + 1) * n) % 1021 + root
            np.testing.assert_array_equal(out, want)
        # In place at the root: the default output is its block of x.
        x = comm.empty(w * n, "float32") if comm.rank == 0 else None
        if x is not None:
            x[:] = np.arange(w * n)
        mine = comm.scatter(x, None if comm.rank == 0 else comm.zeros(n, "float32")).result(T)
        np.testing.assert_array_equal(mine, np.arange(comm.rank * n, (comm.rank + 1) * n))
        with self.assertRaises(ValueError):  # not the root, and no output
            comm.scatter(None, root=comm.rank + 1)

    def test_barrier(self):
        f = comm.barrier()
        self.assertIsNone(f.result(T))
        self.assertIn(f.algo, ("dissemination", "local", "shm"))

    def test_send_recv_ring(self):
        w, r = comm.world_size, comm.rank
        if w == 1:
            self.skipTest("point-to-point needs two ranks")
        out, inp = comm.empty(777, "float32"), comm.zeros(777, "float32")
        out[:] = r
        rf = comm.recv(inp, (r - 1) % w)
        sf = comm.send(out, (r + 1) % w)
        self.assertIsNone(sf.result(T))
        self.assertIs(rf.result(T), inp)
        np.testing.assert_array_equal(inp, (r - 1) % w)

    @needs_torch
    def test_tensors(self):
        w, r = comm.world_size, comm.rank
        t = comm.empty_tensor((w, 5), torch.int64)
        t.fill_(r)
        comm.reduce_scatter(t, op="max").result(T)
        self.assertTrue(torch.equal(t[r], torch.full((5,), w - 1)))
        g = comm.allgather(t[r]).result(T)
        self.assertIsInstance(g, torch.Tensor)
        self.assertEqual(g.shape, (5 * w,))


class Futures(unittest.TestCase):
    def test_callbacks_algo_and_timing(self):
        a = comm.empty(1 << 16)
        a[:] = 1
        seen = []
        f = comm.allreduce(a)
        f.add_done_callback(lambda fut: seen.append(threading.current_thread().name))
        f.result(T)
        deadline = time.monotonic() + T
        while not seen and time.monotonic() < deadline:
            time.sleep(0.001)   # the callback may still be running on the progress thread
        self.assertTrue(seen)
        self.assertFalse(f.cancel())
        self.assertIn(f.algo, ("ring", "rd", "local", "shm"))
        tm = f.timing
        self.assertLessEqual(tm.submit_ns, tm.complete_ns)
        self.assertLessEqual(tm.complete_ns, time.monotonic_ns())
        self.assertEqual(f.operation, "allreduce")

    @needs_torch
    def test_torch_future(self):
        t = comm.empty_tensor(10)
        t.fill_(1)
        tf = comm.allreduce(t).as_torch_future(lambda x: x * 2)
        self.assertIsInstance(tf, torch.futures.Future)
        self.assertTrue(torch.equal(tf.wait(), torch.full((10,), 2.0 * comm.world_size)))

    def test_wait_sleeps_and_does_not_hold_the_gil(self):
        # The last rank enters the barrier 1 s late; meanwhile the others wait on the future.
        if comm.rank == comm.world_size - 1:
            time.sleep(1.0)
        counter = [0]
        stop = threading.Event()

        def spin():   # runs only if the waiting threads leave the GIL free
            while not stop.is_set():
                counter[0] += 1

        cpu0, wall0 = time.process_time(), time.monotonic()
        f = comm.barrier()
        f.result(T)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        if comm.rank != comm.world_size - 1:
            self.assertGreater(wall, 0.5)
            self.assertLess(cpu, 0.25 * wall, "waiting burnt %.2f s of CPU in %.2f s" %
                            (cpu, wall))
            # Again, with a Python thread competing for the GIL while we wait.
            th = threading.Thread(target=spin)
            th.start()
        if comm.rank == comm.world_size - 1:
            time.sleep(0.5)
        comm.barrier().result(T)
        stop.set()
        if comm.rank != comm.world_size - 1:
            th.join(T)
            self.assertGreater(counter[0], 1000)

    def test_result_timeout_leaves_the_operation_running(self):
        late = comm.world_size - 1
        if comm.rank == late:
            time.sleep(0.5)
        f = comm.barrier()
        if comm.rank != late:
            with self.assertRaises(TimeoutError):
                f.result(0.05)
        self.assertIsNone(f.result(T))

    def test_operation_timeout(self):
        # Rank 0 receives from rank 1 under a 0.3 s bound; rank 1 sends only afterwards.
        if comm.world_size == 1:
            self.skipTest("point-to-point needs two ranks")
        key = (1 << 21) + 5
        buf = comm.zeros(16, "int32")
        if comm.rank == 0:
            f = comm.recv(buf, 1, key=key, timeout=0.3)
            with self.assertRaises(CollectiveTimeoutError) as cm:
                f.result(T)
            self.assertEqual(cm.exception.name, "COLL_ERR_TIMEDOUT")
            self.assertIsInstance(cm.exception, TimeoutError)
        comm.barrier().result(T)
        if comm.rank == 1:
            buf[:] = 3
            comm.send(buf, 0, key=key).result(T)   # completes the abandoned receive
        comm.barrier().result(T)


class Errors(unittest.TestCase):
    def test_unsupported_algorithm_fails_the_future(self):
        # Ring cannot broadcast: every rank's future fails, and the job goes on.
        x = comm.empty(100, "int8")
        x[:] = comm.rank
        f = comm.broadcast(x, root=0, algo="ring")
        with self.assertRaises(CollectiveError) as cm:
            f.result(T)
        self.assertEqual(cm.exception.name, "COLL_ERR_UNSUPPORTED")
        self.assertIsNone(f.timing)
        np.testing.assert_array_equal(x, comm.rank)
        comm.barrier().result(T)

    def test_pool_full(self):
        with self.assertRaises(CollectiveError) as cm:
            comm.empty(1 << 40, "uint8")
        self.assertEqual(cm.exception.name, "COLL_ERR_POOL_FULL")
        self.assertTrue(cm.exception.detail)

    def test_python_argument_errors(self):
        a = comm.empty((4, 4))
        with self.assertRaises(ValueError):
            comm.allreduce(a[:, 1])                 # not contiguous
        with self.assertRaises(ValueError):
            comm.allreduce(a, comm.empty(15))       # sizes differ
        with self.assertRaises(TypeError):
            comm.allreduce(a, comm.empty(16, "int32"))
        with self.assertRaises(TypeError):
            comm.allreduce([1.0, 2.0])
        with self.assertRaises(ValueError):
            comm.allreduce(a, op="mean")
        with self.assertRaises(ValueError):
            comm.allreduce(a, key=1 << 39)
        with self.assertRaises(TypeError):
            comm.empty(3, "complex64")


class Memory(unittest.TestCase):
    def test_collected_arrays_return_to_the_pool(self):
        # 100 MiB at a time from a 256 MiB pool, ten times: only works if memory comes back.
        for i in range(10):
            a = comm.empty(100 << 20, "uint8")
            v = a[10:20]
            del a
            gc.collect()
            v[:] = i                                # the view keeps the allocation alive
            del v

    def test_explicit_free(self):
        for i in range(10):
            a = comm.empty((100 << 20) // 8, "float64")
            comm.free(a[1::2] if i % 2 else a)     # any view of the allocation frees it
        with self.assertRaises(ValueError):
            comm.free(np.zeros(3))

    @needs_torch
    def test_tensors_return_to_the_pool(self):
        for _ in range(10):
            t = comm.empty_tensor(25 << 20)        # 100 MiB of float32
            v = t[5:]
            del t
            v.fill_(1)
            del v


class ZzClose(unittest.TestCase):
    """Last (alphabetically): close the communicator."""

    def test_close(self):
        a = comm.empty(8)
        a[:] = 1
        comm.barrier().result(T)
        comm.close()
        comm.close()                                # idempotent
        self.assertTrue(comm.closed)
        a[:] = 2                                    # still mapped: the array keeps it
        with self.assertRaises(ValueError):
            comm.allreduce(a)
        with self.assertRaises(ValueError):
            comm.empty(1)


if __name__ == "__main__":
    sys.exit(common.run_tests(__name__))
