#!/usr/bin/env python3
"""One rank of torch_suite.py: runs torch's DistributedTest tests one by one, as the
coordinator says, in one long-lived process.

torch's own harness (MultiProcessTestCase) spawns the world's processes anew for every test, each
importing torch: seconds per test. Here each rank imports torch and distributed_test once and
then runs what TestDistBackend._run runs for a test, in the same order: init_process_group with
the test's file store and timeout, a file barrier, the test, a file barrier,
destroy_process_group. A skip (unittest.SkipTest, a method marked skipped, or sys.exit with one
of TEST_SKIPS' codes) is reported as skipped; any other exception as an error, with
"wrong result" when it is an AssertionError (a value the test checked), else "error".

Environment (before torch's modules are imported, since they read it then): BACKEND,
WORLD_SIZE, TEMP_DIR as torch's harness has them; RANK (collective-launch and the coordinator
set it); TORCH_SUITE_SOCKET, the coordinator's socket. The coordinator's messages and ours are
JSON lines (see torch_suite.py).
"""

import importlib
import json
import os
import socket
import sys
import traceback
import unittest
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from suite_lists import UNGATED  # noqa: E402

BACKEND = os.environ["BACKEND"]
# Past any barrier number a test reaches: written by a rank whose test failed, so that the
# others' file barriers do not wait their 10 s for it.
GIVE_UP_BARRIER = 1 << 30


def load_suite():
    """The test class: torch's DistributedTest._DistTestBase on TestDistBackend, as the spawn
    file of torch's own CI builds it, with the collectived backend known to the harness."""
    sys.argv = sys.argv[:1]       # common_utils parses the command line at import;
                                  # the expecttest stand-in lies in HERE, on the path
    import torch.distributed as dist
    from torch.testing._internal import common_distributed
    if BACKEND == "collectived":
        importlib.import_module("collective.torch_backend")  # registers the backend
        # The harness's sets of what a backend has: a plugin backend that runs DDP. It is in no
        # skip_collective set, so that the operations it refuses show as errors.
        common_distributed.DistTestCases.backend_feature["plugin"].add(BACKEND)
        common_distributed.DistTestCases.backend_feature["ddp"].add(BACKEND)
    from torch.testing._internal.distributed import distributed_test

    class Suite(distributed_test.TestDistBackend, distributed_test.DistributedTest._DistTestBase):
        pass

    return dist, common_distributed, distributed_test, Suite


def skip_reason(suite_cls, name, exc, skips):
    """Why the test was skipped, or None when @exc is not a skip."""
    if isinstance(exc, unittest.SkipTest):
        return str(exc) or "skipped"
    if isinstance(exc, SystemExit):
        for skip in skips.values():
            if exc.code == skip.exit_code:
                return skip.message
    return None


class Worker:
    def __init__(self):
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.dist, common, self.dt, self.Suite = load_suite()
        self.env = dict(os.environ)
        self.skips = common.TEST_SKIPS
        self.torch = importlib.import_module("torch")
        self.seed = importlib.import_module("torch.testing._internal.common_utils").SEED
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(os.environ["TORCH_SUITE_SOCKET"])
        self.inbox = self.sock.makefile("r")

    def send(self, **msg):
        self.sock.sendall((json.dumps(msg) + "\n").encode())

    def hello(self):
        tests = sorted(n for n in dir(self.Suite) if n.startswith("test_"))
        self.send(hello={"backend": BACKEND, "rank": self.rank,
                         "group": os.environ.get("TORCH_SUITE_GROUP", ""),
                         "tests": tests if self.rank == 0 else []})

    def give_up_barriers(self):
        path = os.path.join(os.environ["TEMP_DIR"], "barrier", str(os.getpid()))
        with self.dt._lock():
            with open(path, "w") as f:
                f.write(str(GIVE_UP_BARRIER))

    def fresh_state(self):
        """What a new process of torch's harness would start a test with: the environment
        (with_dist_debug_levels leaves TORCH_DISTRIBUTED_DEBUG set), the debug level read from
        it, torch's seed from common_utils' import, no barrier passed yet."""
        os.environ.clear()
        os.environ.update(self.env)
        self.dist.set_debug_level_from_env()
        self.torch.manual_seed(self.seed)
        self.dt.Barrier.barrier_id = 0

    def run(self, name, init_file):
        """(status, detail) of one test on this rank."""
        method = getattr(self.Suite, name)
        ungated = BACKEND == "collectived" and name in UNGATED
        if getattr(method, "__unittest_skip__", False) and not ungated:
            return "skipped", getattr(method, "__unittest_skip_why__", "")
        self.fresh_state()
        test = self.Suite(name)
        test.rank, test.file_name = self.rank, init_file
        seconds = self.dt.CUSTOM_PG_TIMEOUT.get(name, self.dt.default_pg_timeout)
        try:
            self.dist.init_process_group(init_method="file://" + init_file, backend=BACKEND,
                                         world_size=self.world, rank=self.rank,
                                         timeout=timedelta(seconds=seconds))
            test._barrier()
            getattr(test, name)()
            test._barrier()
            return "passed", ""
        except (Exception, SystemExit) as e:
            why = skip_reason(self.Suite, name, e, self.skips)
            if why is not None:
                return "skipped", why
            self.give_up_barriers()
            kind = "wrong result" if isinstance(e, AssertionError) else "error"
            return kind, "".join(traceback.format_exception_only(type(e), e)).strip()
        finally:
            if self.dist.is_initialized():
                self.dist.destroy_process_group()

    def serve(self):
        self.hello()
        for line in self.inbox:
            msg = json.loads(line)
            if "quit" in msg:
                return
            try:
                status, detail = self.run(msg["run"], msg["init"])
            except BaseException:  # the harness itself failed: say so, then go on
                status, detail = "error", "the runner: " + traceback.format_exc(limit=3)
            self.send(result=msg["run"], status=status, detail=detail[-2000:])


if __name__ == "__main__":
    Worker().serve()
