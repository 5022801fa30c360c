#!/usr/bin/env python3
"""Tests of the GPU path's memory (label gpu; docs/gpu.md), each with its own daemon and ranks
(tests/gpu/devpool_check.c), on the system tests' harness (tests/system/harness); the stream
waits are in stream_waits_test.py, the helpers both use in gpu_lib.py.

  nodriver   A daemon on a machine without a CUDA driver (the real device layer, no fake)
             starts, logs and shows in /status and /metrics that it has no device layer and
             why (the loader's words, as Python's own dlopen gives them), and serves a host job;
             a device allocation is refused on every rank with COLL_ERR_UNSUPPORTED and the
             reason: by the rank's own device layer (no driver in its process), and by the
             daemon (a rank with the stand-in driver, tests/unit/device/fake_libcuda.c, asks a
             daemon without one; not in a build without CUDA). Skipped where a driver is
             present.
  layers     A rank whose device layer differs from its daemon's (COLL_DEVICE_FAKE set for one
             of the two only) is refused its device allocation with COLL_ERR_UNSUPPORTED and a
             message that says so: which layer each uses, the variable to set, what each
             layer found (the daemon's from its join reply), both ways round, whether or not a
             driver is present; the daemon logs no warning, and the ranks' host jobs run.
  fake_pool  Over the fake device layer (daemon and ranks with COLL_DEVICE_FAKE=1): 4 local
             ranks allocate in one device pool, which grows in chunks, and read each other's
             writes; while they hold their buffers /status and /metrics show the pool (bytes,
             what it holds, allocations, chunks) and the device's budget, and collectivectl
             status shows the device; then an allocation
             beyond device_pool_budget is refused, a compressed broadcast from device
             buffers is refused (the staged path compresses the allreduce only), and once
             the job ended the
             device's pools hold nothing.
  staged     Over the fake device layer, its executor off (COLL_DEVICE_FAKE_NO_EXEC, as for
             staged_async and staged_cache): 2 local ranks run staged_check's collectives on
             device buffers; /metrics then counts each of them once as a staged operation of
             device 0 and the bytes copied both ways that their extents give.
  staged_async
             The same with copies that take time (the daemon's fake device holds every event
             back COLL_DEVICE_FAKE_COPY_DELAY_MS = 250 ms): the collectives stay right, and
             while they run the daemon answers /metrics with a staged operation started and not
             completed (staged operations counted > operations completed), which a daemon whose
             loop waits for the copies never shows (it starts, copies, runs and completes a
             one-node operation in one turn of its loop).
  device     Over the fake device layer with its executor: 2 local ranks run staged_check
             --device (the one-node collectives on the device, device+local); /metrics then
             counts the gather and the scatter alone as staged operations and the executor's
             reductions and copies as kernel launches of device 0.
  peers_split
             Over two fake devices (peers), rank r's buffers on device r, a daemon with
             device_peers_split_min 4096: 2 local ranks run staged_check --device=device+peers
             with float32 allreduces of 5000 elements; /metrics then counts device 1's share
             of those as its own kernel launches (its rank's half reduced, the other half
             copied in: 4 reductions and 3 copies), which device+peers on device 0 alone never
             launched there.
  staged_cache
             Over the fake device layer, a daemon keeping at most 1 MiB of page-locked host
             buffers idle per device, freed after 300 ms idle: 2 local ranks run staged_check's
             collectives on device buffers, right; /metrics and /status then show the cache
             served host copies of the later collectives (hits > 0, fewer locks than host
             copies), kept at most its limit idle and nothing in use; once idle long enough it
             holds nothing.
  nccl_param Three daemons over the fake device layer with the stand-in NCCL, the third with
             nccl = off: a job on the first two has the job parameter nccl on both (/status),
             a job on the first and the third has it off on both, and its root logs why.
  nccl       The same three daemons: staged_check --nccl on the first two (2 ranks each) runs
             all its collectives but the gather and scatter through NCCL ("nccl", counted in
             collectived_device_nccl_operations_total on both), its node's two ranks combined
             and served by the executor of device memory (the fake's: the host's entries) on the
             job's stream, as many reductions and copies in
             collectived_device_kernel_launches_total as its fifteen NCCL collectives need; the same
             job on the first and the third (nccl = off) on the staged path ("staged+...",
             nothing counted there).
  executor   The executor of device memory in /status and /metrics: over the fake device layer
             the host's entries ("fake"), loaded; over the CUDA layer with the stand-in driver
             (tests/unit/device/fake_libcuda.c) the CUDA module, found on the build tree's run
             path, refuses a driver the CUDA runtime cannot use: not loaded, the module named
             and its reason, and the daemon serves a host job; where a real driver is, the
             daemon over it has the module ("cuda") loaded.
  nccl_error Two daemons whose stand-in NCCL fails node 1's collectives asynchronously
             (FAKE_NCCL_ASYNC_ERROR=1): every rank of an allreduce on device buffers gets an
             error naming NCCL within the job timeout + 2 s, the daemons stay up, and a second
             job (host collectives) runs on them.
"""

import ctypes
import os
import re
import socket
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from gpu_lib import NO_EXEC, metric, parser, rank_env, wait_ranks  # noqa: E402

MiB = 1 << 20
BUDGET = 64 * MiB
GRANULARITY = 2 * MiB  # the fake's, as current GPUs'


def run_job(args, work, daemon, job, world, fake, rank_args, env=None):
    """Start @world local ranks of devpool_check on @daemon, @env added to theirs; returns
    them."""
    sub = os.path.join(work, job)
    os.makedirs(sub, exist_ok=True)
    return [h.Rank(r, 0, [args.check] + rank_args,
                   dict(rank_env(daemon, job, r, world, fake), **(env or {})),
                   os.path.join(sub, "r%d.out" % r), local=r, stdin_pipe=False)
            for r in range(world)]


def loader_reason():
    """Why the loader cannot open libcuda.so.1, in its own words; None when it can."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return str(e)
    return None


# ---- nodriver ---------------------------------------------------------------------------------

def cuda_status(args):
    """What the CUDA driver's layer says here when it cannot open; None when a driver is present
    (its status then names the driver's version and devices)."""
    reason = loader_reason()
    if args.built_without_cuda:
        return "built without CUDA (COLL_WITH_CUDA=OFF)"
    return None if reason is None else "no CUDA driver: %s" % reason


def test_nodriver(args, work):
    want = cuda_status(args)
    if want is None:
        raise h.Skip("a CUDA driver is present here")
    d = h.Daemon(args.daemon, work, "node0", peers=False).wait_ready()
    try:
        doc = h.status_json(d.status_sock)["devices"]
        h.check(doc["layer"] == "none" and doc["status"] == want and doc["list"] == [],
                "/status devices: %s, expected the status '%s'" % (doc, want))
        _, _, text = h.http_unix(d.status_sock, "/metrics")
        h.check(metric(text, "collectived_device_layer_available", 'layer="none"') == 0,
                "collectived_device_layer_available is not 0")
        h.check("devices: none (%s): host jobs only, device allocations are refused" % want
                in d.log(), "the daemon did not log why it has no devices:\n%s" % d.log())
        # The rank's own layer refuses (no driver in its process) ...
        wait_ranks(run_job(args, work, d, "own", 2, False,
                           ["--expect-refused", "no device memory in this process: " + want]), d)
        # ... and the daemon refuses a rank that has one (the stand-in driver: the same layer).
        if args.fake_cuda is not None:
            ranks = run_job(args, work, d, "daemon", 2, False,
                            ["--expect-refused", "no device memory on %s: %s"
                             % (socket.gethostname(), want)],
                            env={"LD_LIBRARY_PATH": args.fake_cuda})
            wait_ranks(ranks, d)
            h.log("the daemon refused the ranks over the stand-in driver: %s"
                  % ranks[0].text().strip().splitlines()[0])
        h.check_no_warnings(d.log(), d.name)
    finally:
        d.stop()


# ---- layers -----------------------------------------------------------------------------------

LAYER_WORDS = {True: "the fake (COLL_DEVICE_FAKE set)",
               False: "the CUDA driver's (COLL_DEVICE_FAKE unset)"}
FAKE_STATUS = "fake (COLL_DEVICE_FAKE, test only), 1 device"


def test_layers(args, work):
    for daemon_fake in (True, False):
        env = h.clean_env()
        if daemon_fake:
            env["COLL_DEVICE_FAKE"] = "1"
        d = h.Daemon(args.daemon, work, "fake" if daemon_fake else "cuda", env=env,
                     peers=False).wait_ready()
        try:
            # The rank's status and the daemon's: the fake's, and the CUDA layer's where this
            # machine's is known (no driver); with a driver the text stops before it.
            cuda = cuda_status(args)
            mine, theirs = (cuda, FAKE_STATUS) if daemon_fake else (FAKE_STATUS, cuda)
            want = ("its device layer is %s, its daemon's %s: set COLL_DEVICE_FAKE alike for "
                    "the daemon and its ranks (this process: "
                    % (LAYER_WORDS[not daemon_fake], LAYER_WORDS[daemon_fake]))
            if mine is not None:
                want += mine + "; the daemon: " + (theirs + ")" if theirs is not None else "")
            wait_ranks(run_job(args, work, d, d.name, 2, not daemon_fake,
                               ["--expect-refused", want]), d)
            h.log("daemon %s: refused as expected: ...%s" % (d.name, want))
            h.check_no_warnings(d.log(), d.name)
        finally:
            d.stop()


# ---- fake_pool --------------------------------------------------------------------------------

def check_held(args, d, world):
    doc = h.status_json(d.status_sock)
    dev = doc["devices"]
    h.check(dev["layer"] == "fake" and len(dev["list"]) == 1, "/status devices: %s" % dev)
    pools = doc["jobs"][0]["device_pools"]
    h.check(len(pools) == 1, "the job's device pools: %s" % pools)
    p, dv = pools[0], dev["list"][0]
    # Each rank: (--bytes 3 MiB) + rank MiB and 4096 bytes, each rounded to 64 bytes.
    used = sum(3 * MiB + r * MiB + 4096 for r in range(world))
    h.check(p["device"] == 0 and p["bytes"] == BUDGET and p["used_bytes"] == used
            and p["allocations"] == 2 * world, "the job's device pool: %s (used %d)" % (p, used))
    h.check(p["chunks"] >= 2 and p["held_bytes"] % GRANULARITY == 0
            and used <= p["held_bytes"] <= BUDGET, "the pool did not grow in chunks: %s" % p)
    h.check(dv["pool_budget_bytes"] == BUDGET and dv["pool_held_bytes"] == p["held_bytes"]
            and dv["pool_used_bytes"] == used and dv["pools"] == 1
            and dv["allocations"] == 2 * world, "device 0: %s" % dv)
    _, _, text = h.http_unix(d.status_sock, "/metrics")
    h.check(metric(text, "collectived_device_pool_held_bytes", 'device="0"') == p["held_bytes"]
            and metric(text, "collectived_device_pool_allocations", 'device="0"') == 2 * world
            and metric(text, "collectived_device_layer_available", 'layer="fake"') == 1,
            "device metrics do not match /status")
    _, out = h.run([args.ctl, "--socket", d.status_sock, "status"])
    line = ("device 0: fake device 0 (host memory), 8.0 GiB, compute 0.0; pools hold %.1f MiB "
            "of 64.0 MiB, %d allocations in 1 pools" % (p["held_bytes"] / MiB, 2 * world))
    h.check(line in out and "devices: fake (COLL_DEVICE_FAKE, test only), 1 device" in out,
            "collectivectl status lacks '%s':\n%s" % (line, out))
    h.log("held: %d chunks, %d bytes for %d allocated" % (p["chunks"], p["held_bytes"], used))


def test_fake_pool(args, work):
    env = h.clean_env()
    env["COLL_DEVICE_FAKE"] = "1"
    d = h.Daemon(args.daemon, work, "node0", extra=["--device-pool-budget", str(BUDGET)],
                 env=env, peers=False).wait_ready()
    world, hold = 4, os.path.join(work, "hold")
    try:
        ranks = run_job(args, work, d, "pool", world, True,
                        ["--hold-file", hold, "--budget-bytes", str(BUDGET),
                         "--refuse-collective"])
        h.wait_until(lambda: all(os.path.exists("%s.%d" % (hold, r)) for r in range(world))
                     or None, 30, "every rank to hold its buffers")
        check_held(args, d, world)
        open(hold + ".release", "w").close()
        wait_ranks(ranks, d)
        h.wait_until(lambda: not h.status_json(d.status_sock)["jobs"] or None, 10,
                     "the job to close")
        dv = h.status_json(d.status_sock)["devices"]["list"][0]
        h.check(dv["pool_held_bytes"] == 0 and dv["pools"] == 0 and dv["allocations"] == 0,
                "device 0 after the job: %s" % dv)
        h.check_no_warnings(d.log(), d.name, allowed=("the staged path runs",))
    finally:
        d.stop()


# ---- staged -----------------------------------------------------------------------------------

SMALL = 1031  # staged_check's elements beside the allreduce's


def staged_bytes(world, count):
    """What the staged path copies on one node for staged_check's collectives, both ways: each
    rank's input and output of each (nothing for the input of a broadcast's or a scatter's
    non-root or the output of a reduce's or a gather's)."""
    f32, bf16 = 4, 2
    return (world * 2 * (2 * count * f32)              # allreduce out of place and in place
            + world * 2 * SMALL * bf16                 # bfloat16 allreduce in place
            + 2 * world * (SMALL + SMALL * world) * f32  # all-gather, reduce-scatter
            + 2 * (world + 1) * SMALL * f32            # broadcast, reduce
            + 2 * (2 * world * SMALL) * f32)           # gather, scatter


def test_staged(args, work):
    env = h.clean_env()
    env.update(NO_EXEC)
    d = h.Daemon(args.daemon, work, "node0", env=env, peers=False).wait_ready()
    world, count = 2, 5000
    try:
        ranks = [h.Rank(r, 0, [args.staged, "--count", str(count)],
                        rank_env(d, "staged", r, world, True),
                        os.path.join(work, "staged.r%d.out" % r), local=r, stdin_pipe=False)
                 for r in range(world)]
        wait_ranks(ranks, d)
        _, _, text = h.http_unix(d.status_sock, "/metrics")
        ops = metric(text, "collectived_device_staged_operations_total", 'device="0"')
        copied = metric(text, "collectived_device_staged_bytes_total", 'device="0"')
        h.check(ops == 9 and copied == staged_bytes(world, count),
                "staged metrics: %d operations, %d bytes; expected 9 and %d"
                % (ops, copied, staged_bytes(world, count)))
        h.check_no_warnings(d.log(), d.name)
    finally:
        d.stop()


def test_device(args, work):
    env = h.clean_env()
    env["COLL_DEVICE_FAKE"] = "1"
    d = h.Daemon(args.daemon, work, "node0", env=env, peers=False).wait_ready()
    world = 2
    try:
        ranks = [h.Rank(r, 0, [args.staged, "--device", "--count", "5000"],
                        rank_env(d, "device", r, world, True),
                        os.path.join(work, "device.r%d.out" % r), local=r, stdin_pipe=False)
                 for r in range(world)]
        wait_ranks(ranks, d)
        _, _, text = h.http_unix(d.status_sock, "/metrics")
        name = "collectived_device_kernel_launches_total"
        staged = metric(text, "collectived_device_staged_operations_total", 'device="0"')
        reduces = metric(text, name, 'device="0",kind="reduce"')
        copies = metric(text, name, 'device="0",kind="copy"')
        h.check(staged == 2 and reduces > 0 and copies > 0,
                "device metrics: %d staged operations (the gather and the scatter: 2 expected), "
                "%d reductions and %d copies launched (some of each expected)"
                % (staged, reduces, copies))
        h.check_no_warnings(d.log(), d.name)
    finally:
        d.stop()


def test_peers_split(args, work):
    env = h.clean_env()
    env.update({"COLL_DEVICE_FAKE": "2", "COLLD_DEVICE_PEERS_SPLIT_MIN": "4096"})
    d = h.Daemon(args.daemon, work, "node0", env=env, peers=False).wait_ready()
    world = 2
    try:
        ranks = [h.Rank(r, 0, [args.staged, "--device=device+peers", "--spread=2",
                               "--count", "5000"],
                        dict(rank_env(d, "peers", r, world, True), COLL_DEVICE_FAKE="2"),
                        os.path.join(work, "peers.r%d.out" % r), local=r, stdin_pipe=False)
                 for r in range(world)]
        wait_ranks(ranks, d)
        _, _, text = h.http_unix(d.status_sock, "/metrics")
        name = "collectived_device_kernel_launches_total"
        got = {(dev, kind): metric(text, name, 'device="%d",kind="%s"' % (dev, kind))
               for dev in (0, 1) for kind in ("reduce", "copy")}
        # Device 1's share of the three float32 allreduces of 5000 elements (the sums out of
        # place and in place, the average), split: its rank's half reduced (the average's then
        # divided: a second reduction) and device 0's half copied in, 4 reductions and 3
        # copies; every collective below 4096 elements on device 0 alone.
        h.check(got[1, "reduce"] == 4 and got[1, "copy"] == 3 and got[0, "reduce"] > 4,
                "per-device launches %r: device 1 should have reduced its rank's half of each "
                "float32 allreduce and copied the other half in (4 reductions, 3 copies), "
                "device 0 the rest" % got)
        print("kernel launches by device and kind: %r" % got)
        h.check_no_warnings(d.log(), d.name)
    finally:
        d.stop()


def metric_sum(text, name):
    """The sum of every sample of @name in /metrics (0 when none)."""
    return sum(float(v) for v in re.findall(r"^%s\{[^}]*\} (\S+)$" % re.escape(name), text, re.M))


def test_staged_async(args, work):
    env = h.clean_env()
    env.update(NO_EXEC, COLL_DEVICE_FAKE_COPY_DELAY_MS="250")
    d = h.Daemon(args.daemon, work, "node0", env=env, peers=False).wait_ready()
    world, count, in_flight = 2, 5000, 0
    try:
        ranks = [h.Rank(r, 0, [args.staged, "--count", str(count)],
                        rank_env(d, "async", r, world, True),
                        os.path.join(work, "async.r%d.out" % r), local=r, stdin_pipe=False)
                 for r in range(world)]
        for _ in range(2000):  # 9 operations of 2 x 250 ms copies: well inside the bound
            if not any(r.alive() for r in ranks):
                break
            _, _, text = h.http_unix(d.status_sock, "/metrics")
            started = metric(text, "collectived_device_staged_operations_total", 'device="0"')
            completed = (metric_sum(text, "collectived_operations_total")
                         + metric_sum(text, "collectived_operation_failures_total"))
            in_flight += started > completed
            time.sleep(0.02)
        wait_ranks(ranks, d)
        h.check(in_flight > 0, "/metrics never answered while a staged operation's copies were "
                "in flight: the loop waited for them")
        _, _, text = h.http_unix(d.status_sock, "/metrics")
        h.check(metric(text, "collectived_device_staged_operations_total", 'device="0"') == 9
                and metric(text, "collectived_device_staged_unpinned_total", 'device="0"') == 0,
                "staged metrics after the job:\n%s" % text)
        h.log("%d answers of /metrics with a staged operation in flight" % in_flight)
        h.check_no_warnings(d.log(), d.name)
    finally:
        d.stop()


def test_staged_cache(args, work):
    env = h.clean_env()
    env.update(NO_EXEC)
    limit = MiB
    d = h.Daemon(args.daemon, work, "node0", env=env, peers=False,
                 extra=["--staged-pinned-cache-bytes", str(limit),
                        "--staged-pinned-idle-ms", "300"]).wait_ready()
    world, count = 2, 5000
    try:
        ranks = [h.Rank(r, 0, [args.staged, "--count", str(count)],
                        rank_env(d, "cache", r, world, True),
                        os.path.join(work, "cache.r%d.out" % r), local=r, stdin_pipe=False)
                 for r in range(world)]
        wait_ranks(ranks, d)
        _, _, text = h.http_unix(d.status_sock, "/metrics")
        get = lambda name: metric(text, "collectived_device_staged_pinned_" + name, 'device="0"')
        hits, misses, held, used = get("hits_total"), get("misses_total"), get("held_bytes"), \
            get("used_bytes")
        # 9 collectives, at least one host copy for each rank of each: far more than were locked.
        h.check(hits > 0 and misses + hits >= 9 * world and 0 < held <= limit and used == 0,
                "pinned cache after the job: %d hits, %d misses, %d bytes idle, %d in use"
                % (hits, misses, held, used))
        pin = h.status_json(d.status_sock)["devices"]["list"][0]["staged_pinned"]
        h.check(pin["hits"] == hits and pin["limit_bytes"] == limit, "/status: %s" % pin)
        h.wait_until(lambda: h.status_json(d.status_sock)["devices"]["list"][0]
                     ["staged_pinned"]["held_bytes"] == 0 or None, 10,
                     "the idle page-locked buffers to be freed")
        h.log("pinned cache: %d hits, %d misses, %d bytes idle after the job" % (hits, misses,
                                                                                  held))
        h.check_no_warnings(d.log(), d.name)
    finally:
        d.stop()


# ---- nccl_param -------------------------------------------------------------------------------

def job_nccl(cluster, k, job_id):
    jobs = [j for j in h.status_json(cluster.daemons[k].status_sock)["jobs"] if j["id"] == job_id]
    h.check(len(jobs) == 1, "job %s not in node %d's /status" % (job_id, k))
    return jobs[0]["nccl"]


def nccl_job(args, cluster, work, job_id, nodes):
    """The job parameter nccl of a job of ops_rank on daemons @nodes, seen by each of them."""
    ready, release = os.path.join(work, job_id), os.path.join(work, job_id + ".release")
    job = cluster.start_job(job_id, nodes, 1, [args.rank, "--iters", "3", "--ready-file", ready,
                                               "--stall-rank", "0", "--release-file", release],
                            timeout_ms=30000, token=None,
                            env={"COLL_DEVICE_FAKE": "1", "LD_LIBRARY_PATH": args.fake_nccl})
    h.wait_until(lambda: all(os.path.exists("%s.%d" % (ready, r)) for r in range(len(nodes)))
                 or None, 30, "job %s to meet" % job_id)
    seen = [job_nccl(cluster, k, job_id) for k in nodes]  # rank 0 holds the job until released
    open(release, "w").close()
    job.wait_exit(60, expect=0)
    return seen


def test_nccl_param(args, work):
    if args.fake_nccl is None:
        raise h.Skip("built without CUDA: no stand-in NCCL")
    cluster = h.Cluster(args.daemon, "nccl")
    try:
        cluster.start_daemons(3, node_args=lambda k: ["--nccl", "off"] if k == 2 else [],
                              env={"COLL_DEVICE_FAKE": "1", "LD_LIBRARY_PATH": args.fake_nccl})
        seen = nccl_job(args, cluster, work, "offered", [0, 1])
        h.check(seen == [True, True], "both nodes offer NCCL, the job's nccl: %s" % seen)
        seen = nccl_job(args, cluster, work, "refused", [0, 2])
        h.check(seen == [False, False], "node 2 has nccl = off, the job's nccl: %s" % seen)
        h.check("job refused: device buffers take the staged path between nodes, not NCCL: "
                "node " in cluster.daemons[0].log() and ": nccl = off" in cluster.daemons[0].log(),
                "the root did not log why the job has no NCCL:\n%s" % cluster.daemons[0].log())
        for d in cluster.daemons:
            h.check_no_warnings(d.log(), d.name)
    finally:
        cluster.close()


def nccl_ops(cluster, k):
    _, _, text = h.http_unix(cluster.daemons[k].status_sock, "/metrics")
    return metric(text, "collectived_device_nccl_operations_total", 'device="0"')


def staged_job(args, cluster, job_id, nodes, extra):
    env = {"COLL_DEVICE_FAKE": "1", "LD_LIBRARY_PATH": args.fake_nccl}
    job = cluster.start_job(job_id, nodes, 2, [args.staged, "--count", "5000"] + extra,
                            timeout_ms=30000, token=None, env=env)
    job.wait_exit(60, expect=0)


def kernel_launches(cluster, k, kind):
    _, _, text = h.http_unix(cluster.daemons[k].status_sock, "/metrics")
    return metric(text, "collectived_device_kernel_launches_total", 'kind="%s"' % kind)


# What staged_check --nccl's fifteen NCCL collectives take on a node of 2 ranks (rank 0, the
# reduces' root, on node 0). The sums: one reduction of both inputs for each of the 3 allreduces,
# the reduce-scatter and the reduce (into the root's output on node 0, scratch on node 1), and
# the bfloat16 allreduce's float32 result rounded into the first member's output (1); copies of
# the result to the second member for the allreduces (3), the all-gather (1) and the broadcast
# (1), each member's input to its block for the all-gather (2), and each member's block out of
# the reduce-scatter's scratch (2). The averages: one reduction of both inputs for each of the 3
# allreduces, the reduce-scatter and the reduce, and each finished by a reduction: the
# allreduces' first member's output (3, then copied to the second, 3), each member's block of the
# reduce-scatter (2), the reduce's root's output (on node 0 only). The 16-bit float16 sum and
# products (3 allreduces): a reduction of both inputs into float32 and one rounding into the
# first member's output each (6), copied to the second (3).
NCCL_OPS = 15
NCCL_REDUCES, NCCL_COPIES = [6 + 11 + 6, 6 + 10 + 6], 9 + 3 + 3


def test_nccl(args, work):
    if args.fake_nccl is None:
        raise h.Skip("built without CUDA: no stand-in NCCL")
    cluster = h.Cluster(args.daemon, "nccl")
    try:
        cluster.start_daemons(3, node_args=lambda k: ["--nccl", "off"] if k == 2 else [],
                              env={"COLL_DEVICE_FAKE": "1", "LD_LIBRARY_PATH": args.fake_nccl})
        staged_job(args, cluster, "through-nccl", [0, 1], ["--nccl"])
        seen = [nccl_ops(cluster, k) for k in range(3)]
        h.check(seen == [NCCL_OPS, NCCL_OPS, 0], "NCCL operations per daemon after 3 allreduces, "
                "an all-gather, a reduce-scatter, a broadcast, a reduce, 5 averages and 3 16-bit "
                "sums and products on nodes 0 and 1: %s" % seen)
        launches = [(kernel_launches(cluster, k, "reduce"), kernel_launches(cluster, k, "copy"))
                    for k in range(3)]
        want = [(NCCL_REDUCES[0], NCCL_COPIES), (NCCL_REDUCES[1], NCCL_COPIES), (0, 0)]
        h.check(launches == want, "the executor's reductions and copies per daemon: %s, "
                "expected %s" % (launches, want))
        staged_job(args, cluster, "staged", [0, 2], [])
        seen = [nccl_ops(cluster, k) for k in range(3)]
        h.check(seen == [NCCL_OPS, NCCL_OPS, 0], "a job with a daemon whose nccl = off counted "
                "NCCL operations: %s" % seen)
        for d in cluster.daemons:
            h.check_no_warnings(d.log(), d.name, allowed=("take the staged path",))
    finally:
        cluster.close()


def check_executor(d, loaded, name, status):
    doc = h.status_json(d.status_sock)["devices"]["executor"]
    h.check(doc["loaded"] == loaded and doc["name"] == name and doc["status"].startswith(status),
            "/status devices.executor: %s, expected loaded %s, name '%s', a status starting "
            "'%s'" % (doc, loaded, name, status))
    _, _, text = h.http_unix(d.status_sock, "/metrics")
    h.check(metric(text, "collectived_device_executor_loaded",
                   'executor="%s"' % (name or "none")) == int(loaded),
            "collectived_device_executor_loaded is not %d" % int(loaded))
    return doc["status"]


def test_executor(args, work):
    env = h.clean_env()
    env["COLL_DEVICE_FAKE"] = "1"
    d = h.Daemon(args.daemon, work, "fake", env=env, peers=False).wait_ready()
    try:
        check_executor(d, True, "fake", "fake: the host executor's entries (the fake device's "
                       "memory is host memory)")
        h.check_no_warnings(d.log(), d.name)
    finally:
        d.stop()
    if args.fake_cuda is None:
        raise h.Skip("built without CUDA: no CUDA module, no stand-in driver")
    env = h.clean_env()
    env.pop("COLL_DEVICE_FAKE", None)
    env["LD_LIBRARY_PATH"] = args.fake_cuda
    d = h.Daemon(args.daemon, work, "shim", env=env, peers=False).wait_ready()
    try:
        why = check_executor(d, False, "", "the CUDA module libcollective_cuda.so refused: ")
        h.check("device executor: " + why in d.log(), "the daemon did not log why it has no "
                "executor:\n%s" % d.log())
        wait_ranks([h.Rank(0, 0, [args.rank, "--iters", "3"], rank_env(d, "host", 0, 1, False),
                           os.path.join(work, "shim.r0.out"), stdin_pipe=False)], d)
        h.check_no_warnings(d.log(), d.name)
    finally:
        d.stop()
    if loader_reason() is None:
        d = h.Daemon(args.daemon, work, "real", peers=False).wait_ready()
        try:
            check_executor(d, True, "cuda", "cuda (libcollective_cuda.so)")
        finally:
            d.stop()


def test_nccl_error(args, work):
    if args.fake_nccl is None:
        raise h.Skip("built without CUDA: no stand-in NCCL")
    cluster = h.Cluster(args.daemon, "ncclerr")
    timeout_ms = 5000
    try:
        cluster.start_daemons(2, env={"COLL_DEVICE_FAKE": "1", "FAKE_NCCL_ASYNC_ERROR": "1",
                                      "LD_LIBRARY_PATH": args.fake_nccl})
        t0 = time.monotonic()
        job = cluster.start_job("failing", [0, 1], 1, [args.staged, "--nccl-error"],
                                timeout_ms=timeout_ms, token=None,
                                env={"COLL_DEVICE_FAKE": "1"})
        job.wait_exit(timeout_ms / 1000 + 2 + 10, expect=0)  # the ranks check the error
        print("every rank had NCCL's error %.2f s after the job started" % (time.monotonic() - t0))
        for d in cluster.daemons:
            lines = [ln for ln in d.log().splitlines() if "NCCL between the nodes" in ln]
            h.check(lines, "%s did not log NCCL's failure:\n%s" % (d.name, d.log()))
            print("%s: %s" % (d.name, lines[0]))
        job = cluster.start_job("after", [0, 1], 1, [args.rank, "--iters", "3"],
                                timeout_ms=30000, token=None)
        job.wait_exit(60, expect=0)
    finally:
        cluster.close()


TESTS = {"nodriver": test_nodriver, "layers": test_layers, "fake_pool": test_fake_pool,
         "staged": test_staged, "staged_async": test_staged_async, "device": test_device,
         "peers_split": test_peers_split,
         "staged_cache": test_staged_cache, "nccl_param": test_nccl_param, "nccl": test_nccl,
         "nccl_error": test_nccl_error, "executor": test_executor}


if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), parser(__doc__, TESTS))
