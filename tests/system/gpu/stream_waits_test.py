#!/usr/bin/env python3
"""Stream ordering through daemons of their own (label gpu; docs/gpu.md): the ranks' ready words
waited for on the device (tests/gpu/stream_check.c), on the system tests' harness
(tests/system/harness); the tests' shared helpers are in gpu_lib.py.

  stream_waits
             Over the fake device layer, its executor off: 2 local ranks run stream_check, their
             streams' ready words written 300 ms late, their inputs 100 ms after each call: the
             daemon queues the staged copies in at once behind device waits for the words
             (collectived_device_stream_waits_total counts them; the sums are of the late inputs,
             which copies that did not wait would miss); then a job whose rank 0's word comes
             past the job's timeout (stream_check --stuck): it fails naming rank 0's stream, the
             daemon closes it (the copies waiting on the word released at its end) and serves
             the first job again.
  stream_waits_exec
             The same with the fake's executor: the one-node allreduces (device+local) queue
             their kernels at once on a stream of their own behind device waits for the words,
             which the fake's executor honours (kernels that ran at once would sum the garbage
             before the late inputs); a job of allreduces alone (stream_check --time 3, the
             words 100 ms late) adds at least 3 waits; the stuck job's kernels are kept until
             the job is closed.
  stream_waits_split
             Over 4 fake devices with the executor, device_peers_split_min 0: jobs of 2 and 4
             local ranks, each rank's buffers on a device of its own (stream_check --spread),
             the ready words 300 ms late and the inputs 100 ms after each call, garbage until
             then (the sums are checked against the late inputs); then a job of 3 allreduces
             alone (stream_check --time 3, the words 100 ms late): device+peers split across
             the devices queues each device's block at once on a stream of its own behind
             device waits for the words, so every device the job uses adds at least 3 device
             waits (collectived_device_stream_waits_total by device; none before: the split
             waited for the loop's poll); then the stuck job on 2 devices (rank 0's word 6 s
             late, past the 1 s timeout): it fails, /metrics answers at once after the failure
             (the split's work waiting on the word parked until the job's end, not synchronized
             in the loop), the daemon closes it and serves a job on 2 devices again.
  stream_waits_nccl
             Two daemons, two ranks each, NCCL between them (the stand-in, held by the fake's
             streams as a GPU's kernel is): stream_check --algo nccl with the ready words 300 ms
             late and the inputs 100 ms after each call, garbage until then (the sums are
             checked against the late inputs); a job of 3 allreduces alone, the words 100 ms
             late (stream_check --time 3): each daemon adds at least 3 device waits for the
             words (collectived_device_stream_waits_total), NCCL's work behind them; then a job
             whose rank 0's word comes past the job's 1 s timeout (stream_check --stuck): every
             rank gets the error within the timeout + 2 s, node 0's NCCL work waited on the
             device, its communicator's abort waits for the job's end (else the held call would
             start on an aborted communicator: the fake device faults), no device is faulted,
             and the first job runs again.
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from gpu_lib import NO_EXEC, metric, parser, rank_env, wait_ranks  # noqa: E402


# ---- stream_waits -----------------------------------------------------------------------------

def stream_ranks(args, d, work, job, rank_args, env, world=2):
    return [h.Rank(r, 0, [args.stream] + rank_args, dict(rank_env(d, job, r, world, True), **env),
                   os.path.join(work, "%s.r%d.out" % (job, r)), local=r, stdin_pipe=False)
            for r in range(world)]


def stream_job(args, d, work, job, rank_args, env, world=2):
    wait_ranks(stream_ranks(args, d, work, job, rank_args, env, world), d)


def wait_closed(d, job):
    deadline = time.time() + 20
    while "job %s: closed on this node" % job not in d.log() and time.time() < deadline:
        time.sleep(0.1)
    h.check("job %s: closed on this node" % job in d.log(),
            "the failed job with work waiting on a word was not closed:\n" + d.log())


def test_stream_waits(args, work, exec_on=False):
    env = h.clean_env()
    env.update({"COLL_DEVICE_FAKE": "1"} if exec_on else NO_EXEC)
    d = h.Daemon(args.daemon, work, "node0", env=env, peers=False).wait_ready()
    late = {"COLL_DEVICE_FAKE_COPY_DELAY_MS": "300"}
    algo = ["--algo", "device+local"] if exec_on else []
    try:
        stream_job(args, d, work, "waits", ["--late", "100"] + algo, late)
        _, _, text = h.http_unix(d.status_sock, "/metrics")
        waits = metric(text, "collectived_device_stream_waits_total", 'device="0"')
        h.check(waits > 0, "no device wait queued for a ready word: the %s waited for the "
                "loop's poll" % ("executor's work" if exec_on else "copies in"))
        if exec_on:  # allreduces alone (the first job's messages are staged): device+local's
            stream_job(args, d, work, "timed", ["--time", "3", "--late", "100"] + algo, {})
            _, _, text = h.http_unix(d.status_sock, "/metrics")
            more = metric(text, "collectived_device_stream_waits_total", 'device="0"') - waits
            h.check(more >= 3, "%d device waits for 3 allreduces on the device whose words "
                    "came late: the executor's work waited for the loop's poll" % more)
        h.check_no_warnings(d.log(), d.name)
        stream_job(args, d, work, "stuck", ["--stuck", "3000"], {"COLL_TIMEOUT_MS": "1000"})
        wait_closed(d, "stuck")
        stream_job(args, d, work, "again", ["--late", "100"] + algo, late)
        h.log("%d device waits for the first job's ready words" % waits)
    finally:
        d.stop()


def test_stream_waits_exec(args, work):
    test_stream_waits(args, work, exec_on=True)


def test_stream_waits_split(args, work):
    devices = 4
    env = h.clean_env()
    env.update({"COLL_DEVICE_FAKE": str(devices), "COLLD_DEVICE_PEERS_SPLIT_MIN": "0"})
    d = h.Daemon(args.daemon, work, "node0", env=env, peers=False).wait_ready()
    fake = {"COLL_DEVICE_FAKE": str(devices)}
    late = dict(fake, COLL_DEVICE_FAKE_COPY_DELAY_MS="300")
    algo = ["--algo", "device+peers"]

    def waits():
        _, _, text = h.http_unix(d.status_sock, "/metrics")
        return [metric(text, "collectived_device_stream_waits_total", 'device="%d"' % k)
                for k in range(devices)]
    try:
        for world in (2, 4):  # one device a rank: every device does a block of the split
            spread = ["--spread", str(world)]
            stream_job(args, d, work, "split%d" % world, ["--late", "100"] + spread + algo, late,
                       world)
            before = waits()  # allreduces alone (the first job's messages are staged)
            stream_job(args, d, work, "timed%d" % world, ["--time", "3", "--late", "100"] + spread,
                       fake, world)
            more = [a - b for a, b in zip(waits(), before)]
            h.check(all(m >= 3 for m in more[:world]),
                    "device waits for the ready words by device for 3 allreduces on %d ranks: "
                    "%s: the split's work waited for the loop's poll" % (world, more))
            h.log("%d ranks: device waits by device %s" % (world, more[:world]))
        h.check_no_warnings(d.log(), d.name)
        ranks = stream_ranks(args, d, work, "stuck", ["--stuck", "6000", "--spread", "2"],
                             dict(fake, COLL_TIMEOUT_MS="1000"))
        h.wait_until(lambda: "job stuck failed" in d.log() or None, 10, "the stuck job to fail")
        t0 = time.monotonic()  # the word is 5 s away: a loop syncing the split's streams waits
        h.http_unix(d.status_sock, "/metrics")
        took = time.monotonic() - t0
        h.check(took < 2, "/metrics took %.1f s after the stuck job failed: the loop waited for "
                "the split's work behind the word instead of parking it" % took)
        wait_ranks(ranks, d)
        wait_closed(d, "stuck")
        stream_job(args, d, work, "again", ["--late", "100", "--spread", "2"] + algo, late)
    finally:
        d.stop()


# ---- stream_waits_nccl ------------------------------------------------------------------------

def nccl_waits(cluster):
    out = []
    for d in cluster.daemons:
        _, _, text = h.http_unix(d.status_sock, "/metrics")
        out.append(metric(text, "collectived_device_stream_waits_total", 'device="0"'))
    return out


def device_faulted(d):
    _, _, text = h.http_unix(d.status_sock, "/metrics")
    return metric(text, "collectived_device_faulted", 'device="0"')


def test_stream_waits_nccl(args, work):
    if args.fake_nccl is None:
        raise h.Skip("built without CUDA: no stand-in NCCL")
    cluster = h.Cluster(args.daemon, "ncclwait")
    env = {"COLL_DEVICE_FAKE": "1", "LD_LIBRARY_PATH": args.fake_nccl}
    timeout_ms = 1000
    try:
        cluster.start_daemons(2, env=env)
        job = cluster.start_job("waits", [0, 1], 2, [args.stream, "--late", "100", "--algo",
                                                      "nccl"], timeout_ms=30000, token=None,
                                env=dict(env, COLL_DEVICE_FAKE_COPY_DELAY_MS="300"))
        job.wait_exit(60, expect=0)
        before = nccl_waits(cluster)  # allreduces alone (the first job's messages are staged)
        job = cluster.start_job("timed", [0, 1], 2, [args.stream, "--time", "3", "--late", "100",
                                                      "--algo", "nccl"], timeout_ms=30000,
                                token=None, env=env)
        job.wait_exit(60, expect=0)
        waits = nccl_waits(cluster)
        h.check(all(w - b >= 3 for w, b in zip(waits, before)), "device waits per daemon for 3 "
                "NCCL allreduces whose words came late: %s, before %s (none added: NCCL's work "
                "waited for the loop's poll)" % (waits, before))
        t0 = time.monotonic()
        job = cluster.start_job("stuck", [0, 1], 2, [args.stream, "--stuck", "3000"],
                                timeout_ms=timeout_ms, token=None, env=env)
        job.wait_exit(timeout_ms / 1000 + 2 + 10, expect=0)  # each rank checks its error's time
        print("every rank had the stuck job's error %.2f s after it started"
              % (time.monotonic() - t0))
        more = nccl_waits(cluster)
        h.check(more[0] > waits[0], "node 0 queued no device wait for rank 0's stuck word: %s"
                % more)
        d0 = cluster.daemons[0]
        h.wait_until(lambda: "job stuck: closed on this node" in d0.log() or None, 20,
                     "node 0 to close the stuck job")
        h.check("job stuck: NCCL communicator of group 0 waits for 1 ranks' ready words: "
                "aborted when the job ends here" in d0.log(),
                "node 0 did not defer its communicator's abort:\n" + d0.log())
        for d in cluster.daemons:
            h.check(device_faulted(d) == 0, "%s's device faulted: the NCCL call held behind the "
                    "stuck word started on an aborted communicator:\n%s" % (d.name, d.log()))
        job = cluster.start_job("again", [0, 1], 2, [args.stream, "--late", "100", "--algo",
                                                      "nccl"], timeout_ms=30000, token=None,
                                env=dict(env, COLL_DEVICE_FAKE_COPY_DELAY_MS="300"))
        job.wait_exit(60, expect=0)
    finally:
        cluster.close()


TESTS = {"stream_waits": test_stream_waits, "stream_waits_exec": test_stream_waits_exec,
         "stream_waits_split": test_stream_waits_split,
         "stream_waits_nccl": test_stream_waits_nccl}


if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), parser(__doc__, TESTS))
