"""What the GPU path's system tests share (gpu_test.py, stream_waits_test.py): the ranks'
environment, waiting for them, reading /metrics, and the command line both take (the same
arguments from tests/system/gpu/CMakeLists.txt, whichever file a test is in)."""

import re

import harness as h  # the tests put tests/system on the path first

# A daemon over the fake device layer without the executor of device memory, whose one-node
# collectives on device buffers take the staged path (with it they run on the device: device).
NO_EXEC = {"COLL_DEVICE_FAKE": "1", "COLL_DEVICE_FAKE_NO_EXEC": "1"}


def rank_env(daemon, job, rank, world, fake):
    """The environment of local rank @rank of @world of @job on @daemon, over the fake device
    layer when @fake."""
    env = h.clean_env()
    env.update({"COLL_SOCKET": daemon.sock, "COLL_JOB": job, "COLL_RANK": str(rank),
                "COLL_WORLD_SIZE": str(world), "COLL_LOCAL_RANK": str(rank),
                "COLL_LOCAL_SIZE": str(world), "COLL_TIMEOUT_MS": "30000"})
    if fake:
        env["COLL_DEVICE_FAKE"] = "1"
    return env


def wait_ranks(ranks, daemon, timeout=60):
    """Wait for @ranks to exit 0 (each within @timeout s), else fail with its and @daemon's
    output."""
    for r in ranks:
        rc = r.wait(timeout)
        h.check(rc == 0, "rank %d exited with %d:\n%s\n---- daemon ----\n%s"
                % (r.rank, rc, r.text(), daemon.log()))


def metric(text, name, labels=""):
    """The value of the first sample of @name in /metrics @text whose labels hold @labels."""
    m = re.search(r"^%s\{[^}]*%s[^}]*\} (\S+)$" % (re.escape(name), re.escape(labels)), text,
                  re.M)
    h.check(m is not None, "no sample of %s{%s} in /metrics" % (name, labels))
    return float(m.group(1))


def parser(doc, tests):
    """The command line of a file of @tests described by @doc."""
    p = h.named_parser(doc, tests)
    p.add_argument("--check", required=True, help="devpool_check")
    p.add_argument("--ctl", required=True, help="collectivectl")
    p.add_argument("--staged", help="staged_check (the staged test)")
    p.add_argument("--stream", help="stream_check (the stream_waits tests)")
    p.add_argument("--fake-nccl", help="the stand-in NCCL's directory (the nccl_param test)")
    p.add_argument("--fake-cuda", help="the stand-in driver's directory (the executor test)")
    p.add_argument("--built-without-cuda", action="store_true",
                   help="the build left the CUDA module out: its reason, not the loader's")
    return p
