#!/usr/bin/env python3
"""The torch backend started as torch users start it (ctest label ecosystem):
`torchrun_test.py NAME ...`.

  torch_no_daemon       init_process_group("collectived") with no daemon at COLL_SOCKET fails
                        within the default connect timeout (COLL_CONNECT_TIMEOUT_MS, 10 s; not
                        the group's 30-minute timeout), saying which socket and which variable;
                        the test measures the wait
  torch_no_root         two nodes whose COLL_ROOT has no daemon: both ranks fail within the
                        connect timeout (2 s here), the message naming the root address
  torchrun_master_addr  a two-node torchrun job (two torchrun agents, 2 ranks each, one daemon
                        per node) with MASTER_ADDR and MASTER_PORT only: no COLL_ROOT, COLL_JOB
                        or COLL_JOB_TOKEN. The root daemon listens on MASTER_ADDR at the
                        default port 29510 (a loopback address of its own, 127.x.y.z, so that
                        no other daemon of this machine holds it). DDP trains to the weights of
                        one process on the global batch; the default group and a new group
                        carry one job-id base; each group has its own random token
"""

import os
import random
import re
import socket
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import Skip, check, log  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONNECT_DEFAULT_S = 10.0   # COLL_CONNECT_TIMEOUT_DEFAULT_MS
ROOT_PORT = 29510          # the daemon's default listen port, the root's default under torch

ONE_RANK = """
import sys, time, datetime
import torch.distributed as dist
t0 = time.monotonic()
try:
    dist.init_process_group("collectived", init_method="tcp://127.0.0.1:%d", rank=%d,
                            world_size=%d, timeout=datetime.timedelta(minutes=30))
except RuntimeError as e:
    print("FAILED after %%.2f s: %%s" %% (time.monotonic() - t0, e))
    sys.exit(3)
print("JOINED")
"""


def torch_env(args, extra):
    """The test environment with the build's package and its backend registered (the .pth in
    the build's torch-site, as tests/system/torch/CMakeLists.txt sets it up)."""
    site = os.path.join(args.build_dir, "tests", "system", "torch", "torch-site")
    env = h.python_env(args, {"PYTHONUSERBASE": site, "PYTHONDONTWRITEBYTECODE": "1"})
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
              "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    env.update(extra)
    return env


def require_torch(args):
    rc, out = h.run([h.PYTHON, "-c", "import collective.torch_backend"],
                    env=torch_env(args, {}), check=False, echo=False)
    if rc != 0:
        raise Skip("the torch backend cannot be imported: %s" % out.strip()[-300:])


def free_port(host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def failed_after(out):
    """The seconds a rank's init_process_group took to fail, from its FAILED line."""
    m = re.search(r"FAILED after ([0-9.]+) s: (.*)", out, re.S)
    check(m is not None, "init_process_group did not fail:\n%s" % out)
    return float(m.group(1)), m.group(2)


def test_torch_no_daemon(args, work):
    require_torch(args)
    sock = os.path.join(work, "none.sock")
    env = torch_env(args, {"COLL_SOCKET": sock})
    rc, out = h.run([h.PYTHON, "-c", ONE_RANK % (free_port(), 0, 1)], env=env,
                    timeout=120, check=False)
    waited, why = failed_after(out)
    check(rc == 3, "exit %d:\n%s" % (rc, out))
    for words in (sock, "COLL_CONNECT_TIMEOUT_MS", "COLL_SOCKET", "COLL_ERR_CONNREFUSED"):
        check(words in why, "the message does not say %r: %s" % (words, why))
    # The connect timeout is the library's wait; the upper bound only tells it from the group's
    # 30 minutes (torch's own start-up, on a loaded machine, takes a few seconds more).
    check(waited >= CONNECT_DEFAULT_S, "failed after %.2f s, before the %g s connect timeout"
          % (waited, CONNECT_DEFAULT_S))
    check(waited < CONNECT_DEFAULT_S + 20, "failed only after %.2f s" % waited)
    log("no daemon: init_process_group failed after %.2f s (connect timeout %g s)"
        % (waited, CONNECT_DEFAULT_S))


def test_torch_no_root(args, work):
    require_torch(args)
    daemons = [h.Daemon(args.daemon, work, "n%d" % k).wait_ready() for k in range(2)]
    root = "127.0.0.1:%d" % free_port()   # nothing listens there
    port = free_port()
    try:
        procs = []
        for rank, d in enumerate(daemons):
            env = torch_env(args, {"COLL_SOCKET": d.sock, "COLL_ROOT": root,
                                   "COLL_CONNECT_TIMEOUT_MS": "2000"})
            procs.append(h.Timed([h.PYTHON, "-c", ONE_RANK % (port, rank, 2)], env))
        for rank, p in enumerate(procs):
            rc = p.wait(120)
            waited, why = failed_after(p.text())
            check(rc == 3, "rank %d: exit %d:\n%s" % (rank, rc, p.text()))
            for words in ("no root daemon at %s (COLL_ROOT) within 2000 ms" % root,
                          "COLL_CONNECT_TIMEOUT_MS", "COLL_ERR_RENDEZVOUS"):
                check(words in why, "rank %d: the message does not say %r: %s"
                      % (rank, words, why))
            check(2.0 <= waited < 30, "rank %d failed after %.2f s" % (rank, waited))
            log("no root: rank %d failed after %.2f s (connect timeout 2 s)" % (rank, waited))
    finally:
        for d in daemons:
            d.kill()


def torchrun(node, addr, port, work):
    """One torchrun agent: node @node of 2, 2 ranks, rendezvous at @addr:@port. torch 1.13's
    agent reads its default "--redirects 0 --tee 0" as nothing under Python 3.11 (a Flag's
    iteration skips the 0 member) and fails: stderr is redirected to a file and teed instead."""
    return [h.PYTHON, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank",
            str(node), "--nproc_per_node", "2", "--master_addr", addr, "--master_port",
            str(port), "--redirects", "2", "--tee", "2", "--log_dir",
            os.path.join(work, "torchrun%d" % node), os.path.join(HERE, "torchrun_rank.py")]


def test_torchrun_master_addr(args, work):
    require_torch(args)
    addr = "127.%d.%d.%d" % (random.randint(1, 254), random.randint(0, 255),
                             random.randint(1, 254))
    daemons = [h.Daemon(args.daemon, work, "n0", extra=("--listen", "%s:%d"
                                                         % (addr, ROOT_PORT))),
               h.Daemon(args.daemon, work, "n1")]
    try:
        for d in daemons:
            d.wait_ready()
        port = free_port(addr)
        agents = [h.Timed(torchrun(k, addr, port, work),
                          torch_env(args, {"COLL_SOCKET": d.sock}))
                  for k, d in enumerate(daemons)]
        for k, a in enumerate(agents):
            rc = a.wait(240)
            check(rc == 0, "torchrun node %d exited %d:\n%s" % (k, rc, a.text()))
        out = agents[0].text() + agents[1].text()
        check(sum("RANK %d OK" % r in out for r in range(4)) == 4, "not every rank:\n" + out)
        groups = re.findall(r"GROUP (\S+) (\S+) (\S+) (\S+)", out)
        check(len(groups) == 2, "the groups' setups:\n" + out)
        (_, job0, token0, root0), (_, job1, token1, _) = groups
        check(root0 == "%s:%d" % (addr, ROOT_PORT), "root %s, not MASTER_ADDR:%d"
              % (root0, ROOT_PORT))
        base = job0.rsplit(".pg", 1)[0]
        check(job1.startswith(base + ".pg") and job1 != job0,
              "the new group's job %s does not carry the job's base %s" % (job1, base))
        check(re.fullmatch(r"torch-[0-9a-f]{8}", base) is not None, "base %s" % base)
        for token in (token0, token1):
            check(re.fullmatch(r"[0-9a-f]{32}", token) is not None, "token %r" % token)
        check(token0 != token1, "two groups with one token")
        log("torchrun on 2 nodes from MASTER_ADDR %s alone: jobs %s and %s" % (addr, job0, job1))
    finally:
        for d in daemons:
            d.kill()


TESTS = {name[len("test_"):]: fn for name, fn in globals().items() if name.startswith("test_")}

if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), h.named_parser(__doc__, TESTS))
