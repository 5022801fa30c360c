#!/usr/bin/env python3
"""A daemon that is not there yet, never comes, or stops answering, seen from the Python
package: a rank started before its node's collectived waits for it and then runs an allreduce
correctly; a socket where no daemon ever comes fails with COLL_ERR_CONNREFUSED once the job's
timeout (+ 1 s) has passed, not before, saying how long it waited; a path that is no socket (a
directory, an empty path) fails at once; an allreduce submitted to a daemon that was then
stopped (SIGSTOP) fails with COLL_ERR_TIMEDOUT at the job's timeout + 1 s, not when the daemon
resumes.

Usage: test_no_daemon.py --daemon build/daemon/collectived
Exit status: 0 all passed, 1 a failure, 77 (skip) when numpy is missing.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

np = common.require("numpy")
import collective  # noqa: E402
from collective import CollectiveError  # noqa: E402

DAEMON = None  # --daemon
LATE_S = 1.5   # the daemon starts this long after the rank (past the 1 s note)


def one_rank(sock, timeout):
    return collective.Communicator(socket=sock, job="late", rank=0, world_size=1, local_rank=0,
                                   local_size=1, timeout=timeout)


class Connect(unittest.TestCase):
    def test_daemon_starts_late(self):
        with tempfile.TemporaryDirectory() as tmp:
            sock = os.path.join(tmp, "c.sock")
            result = {}

            def rank():
                try:
                    with one_rank(sock, 20) as comm:
                        x = comm.empty(1000)
                        x[:] = np.arange(1000, dtype=np.float32)
                        comm.allreduce(x, op="max").result()
                        result["values"] = x.copy()
                except CollectiveError as e:
                    result["error"] = e

            t = threading.Thread(target=rank)
            t.start()
            time.sleep(LATE_S)
            # One rank: no peers, so no node secret and no control listener.
            d = subprocess.Popen([DAEMON, "--config", "none", "--socket", sock,
                                  "--peer-secret-file", ""],
                                 stdin=subprocess.DEVNULL)
            try:
                t.join(60)
            finally:
                d.terminate()
                d.wait(30)
            self.assertFalse(t.is_alive(), "the rank still waits 60 s after the daemon started")
            self.assertNotIn("error", result)
            np.testing.assert_array_equal(result["values"], np.arange(1000, dtype=np.float32))

    def test_no_daemon_fails_after_the_timeout(self):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            with self.assertRaises(CollectiveError) as cm:
                one_rank(os.path.join(tmp, "none.sock"), 1)
            waited = time.monotonic() - t0
        e = cm.exception
        self.assertEqual(e.name, "COLL_ERR_CONNREFUSED")
        # The job's timeout (1 s), which bounds all of the create; a generous upper bound only
        # guards against a wait with no bound at all.
        self.assertGreaterEqual(waited, 1.0)
        self.assertLess(waited, 30.0)

    def test_not_a_socket_fails_at_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            for path, name, why in ((tmp, "COLL_ERR_CONNREFUSED", "not a socket"),
                                    ("", "COLL_ERR_INVALID", "is empty")):
                t0 = time.monotonic()
                with self.assertRaises(CollectiveError) as cm:
                    one_rank(path, 20)
                self.assertLess(time.monotonic() - t0, 10.0, path)  # not the 21 s bound
                self.assertEqual(cm.exception.name, name, path)
                self.assertIn(why, cm.exception.detail)

    def test_stopped_daemon_times_out(self):
        with tempfile.TemporaryDirectory() as tmp:
            sock = os.path.join(tmp, "c.sock")
            # No shared-memory path: a one-rank job's collectives would complete without the
            # daemon, and this is about a daemon that stops answering.
            d = subprocess.Popen([DAEMON, "--config", "none", "--socket", sock,
                                  "--peer-secret-file", "", "--shm-max-bytes", "0"],
                                 stdin=subprocess.DEVNULL)
            try:
                with one_rank(sock, 1) as comm:
                    x = comm.empty(100)
                    x[:] = 1.0
                    comm.allreduce(x).result()
                    d.send_signal(signal.SIGSTOP)
                    t0 = time.monotonic()
                    fut = comm.allreduce(x)
                    with self.assertRaises(collective.CollectiveTimeoutError) as cm:
                        fut.result()
                    waited = time.monotonic() - t0
                    d.send_signal(signal.SIGCONT)
                self.assertIn("is the daemon stopped?", str(cm.exception))
                # The job's timeout (1 s) + the library's slack (1 s); resuming the daemon is
                # what an unbounded wait would need.
                self.assertGreaterEqual(waited, 1.9)
                self.assertLess(waited, 10.0)
            finally:
                d.send_signal(signal.SIGCONT)
                d.terminate()
                d.wait(30)


def main():
    global DAEMON
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--daemon", required=True, help="collectived of the build")
    DAEMON = os.path.abspath(p.parse_args().daemon)
    return common.run_tests(__name__)


if __name__ == "__main__":
    sys.exit(main())
