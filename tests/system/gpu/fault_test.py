#!/usr/bin/env python3
"""A fault of the daemon's work on a device (label gpu; docs/gpu.md, "A device's fault"), each
test with daemons of its own over the fake device layer, whose executor faults the device at its
first launch (COLL_DEVICE_FAKE_EXEC_FAIL=1, as a kernel reading an illegal address: the launch
succeeds, the next event query reports CUDA_ERROR_ILLEGAL_ADDRESS, sticky for the daemon's
context). In each: an allreduce on device buffers (tests/gpu/staged_check.c --fails-with) fails
on every rank with an error naming CUDA_ERROR_ILLEGAL_ADDRESS within the job's timeout + 2 s
(never a success, whose result would be wrong); every daemon stays up; a daemon whose device
faulted logs it, its /status names the fault on the device (its "fault") and /metrics has
collectived_device_faulted 1 for it (every daemon on one node; on two nodes at least one: the
first fault fails the job, and the other node's work may never have been queued); a second
job, on the nodes whose device faulted, has its device allocation there refused with
COLL_ERR_UNSUPPORTED and a message naming the earlier fault, its host allreduce running
(tests/gpu/devpool_check.c --expect-refused); a third job of host collectives (ops_rank) runs.

  local   1x2, one fake device: device+local.
  peers   1x2, two fake devices that are peers, rank r's buffers on device r: device+peers,
          whose work runs on device 0 (the allreduce below device_peers_split_min), the one
          faulted; device 1's pool still serves a job.
  peers_second
          The same split across the two devices (device_peers_split_min 0: each device reduces
          its rank's half), the second launch faulting: device 1's reduction, so device 1 is
          the one faulted, named and refused; device 0's pool still serves a job.
  nccl    2x2 over the stand-in NCCL (tests/unit/device/fake_libnccl.c): each node's two ranks
          reduced by its daemon's executor before NCCL, which faults each daemon's device.
  nccl_one  the same, only node 0's daemon faulting: node 1's ranks, whose device is sound,
          get an error too (the stand-in issues no collective on a faulted device, so node 1's
          waits for node 0's part, as NCCL's would, until the job's failure aborts it; before,
          node 1's ranks got COLL_OK with a sum lacking node 0's part).
  staged  2x2 on the staged path (no NCCL), the daemons' first copy faulting instead of a
          launch (COLL_DEVICE_FAKE_COPY_FAIL=1): the copies' event query reports it.
"""

import os
import re
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402

FAULT = "CUDA_ERROR_ILLEGAL_ADDRESS"
TIMEOUT_MS = 5000


def said(job):
    """Print what each rank of @job said it checked."""
    for r in job.ranks.values():
        print(r.text().strip().splitlines()[0])


def shows_fault(d, dev):
    """@d's /status names the fault on device @dev, and /metrics counts it there (and not on
    the other devices)."""
    devs = h.status_json(d.status_sock)["devices"]["list"]
    h.check(FAULT in devs[dev]["fault"],
            "%s: /status device %d fault: %r" % (d.name, dev, devs[dev]["fault"]))
    _, _, text = h.http_unix(d.status_sock, "/metrics")
    for k in range(len(devs)):
        h.check(re.search(r'^collectived_device_faulted\{device="%d",[^}]*\} %d$'
                          % (k, k == dev), text, re.M),
                "%s: /metrics has no collectived_device_faulted %d for device %d"
                % (d.name, k == dev, k))


def run(args, name, ndev, nodes, rank_args, daemon_env=None, inject="EXEC", at=1, dev=0,
        sound=0, fails_with=FAULT):
    """@ndev fake devices, the @at-th launch (or copy) faulting device @dev, on daemons @nodes
    but the last @sound of them; every rank's allreduce must fail naming @fails_with."""
    fake = {"COLL_DEVICE_FAKE": str(ndev)}
    cluster = h.Cluster(args.daemon, "fault" + name)
    try:
        fail = {"COLL_DEVICE_FAKE_%s_FAIL" % inject: str(at)}
        cluster.start_daemons(len(nodes) - sound, env=dict(fake, **fail, **(daemon_env or {})))
        cluster.start_daemons(sound, env=dict(fake, **(daemon_env or {})))
        t0 = time.monotonic()
        job = cluster.start_job("faulting", nodes, 2,
                                [args.staged, "--fails-with", fails_with] + rank_args,
                                timeout_ms=TIMEOUT_MS, token=None, env=fake)
        job.wait_exit(TIMEOUT_MS / 1000 + 2, expect=0)  # the ranks check the error
        took = time.monotonic() - t0
        h.check(took < TIMEOUT_MS / 1000 + 2, "the ranks took %.2f s" % took)
        print("every rank had the device's error %.2f s after the job started" % took)
        said(job)
        faulted = []
        for k, d in enumerate(cluster.daemons):
            h.check(os.path.exists("/proc/%d" % d.pid) and d.exit_code is None,
                    "%s exited:\n%s" % (d.name, d.log()))
            lines = [ln for ln in d.log().splitlines()
                     if FAULT in ln and "refused until the daemon restarts" in ln]
            if lines:
                print("%s: %s" % (d.name, lines[0]))
                shows_fault(d, dev)
                faulted.append(nodes[k])
        # Each daemon faults at its first launch or copy, but a node whose fault fails the job
        # first may spare the other node's device (its ranks' work never queued): at least one.
        h.check(faulted and (len(nodes) > 1 or faulted == nodes),
                "no daemon logged the device's fault:\n%s" % cluster.daemons[0].log())
        h.check(not sound or faulted == nodes[:len(nodes) - sound],
                "the daemons %s logged a fault; only %s faulted" % (faulted, nodes[:-sound]))
        job = cluster.start_job("refused", faulted, 2,
                                [args.check, "--device", str(dev), "--expect-refused", FAULT],
                                timeout_ms=30000, token=None, env=fake)
        job.wait_exit(60, expect=0)
        said(job)
        if ndev > 1:  # the sound device still serves
            job = cluster.start_job("sound", nodes, 2, [args.check, "--device", str(1 - dev)],
                                    timeout_ms=30000, token=None, env=fake)
            job.wait_exit(60, expect=0)
        job = cluster.start_job("host", nodes, 2, [args.rank, "--iters", "3"],
                                timeout_ms=30000, token=None)
        job.wait_exit(60, expect=0)
    finally:
        cluster.close()


def test_local(args, work):
    run(args, "local", 1, [0], ["--device"])


def test_peers(args, work):
    run(args, "peers", 2, [0], ["--device=device+peers", "--spread=2"])


def test_peers_second(args, work):
    run(args, "peers_second", 2, [0], ["--device=device+peers", "--spread=2"],
        {"COLLD_DEVICE_PEERS_SPLIT_MIN": "0"}, at=2, dev=1)


def test_nccl(args, work):
    if args.fake_nccl is None:
        raise h.Skip("built without CUDA: no stand-in NCCL")
    run(args, "nccl", 1, [0, 1], ["--nccl"], {"LD_LIBRARY_PATH": args.fake_nccl})


def test_nccl_one(args, work):
    if args.fake_nccl is None:
        raise h.Skip("built without CUDA: no stand-in NCCL")
    # Node 1's device is sound: its NCCL call waits for node 0's, which its faulted device
    # never issues, until the job's failure aborts the communicators (its ranks' error is the
    # job's: "job faulting: ...", node 0's fault or NCCL's abort, whichever node 1 heard first).
    run(args, "nccl_one", 1, [0, 1], ["--nccl"], {"LD_LIBRARY_PATH": args.fake_nccl}, sound=1,
        fails_with="job faulting: ")


def test_staged(args, work):
    run(args, "staged", 1, [0, 1], [], inject="COPY")


TESTS = {"local": test_local, "peers": test_peers, "peers_second": test_peers_second,
         "nccl": test_nccl, "nccl_one": test_nccl_one, "staged": test_staged}


def parser():
    p = h.named_parser(__doc__, TESTS)
    p.add_argument("--check", required=True, help="devpool_check")
    p.add_argument("--staged", required=True, help="staged_check")
    p.add_argument("--fake-nccl", help="the stand-in NCCL's directory (the nccl test)")
    return p


if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), parser())
