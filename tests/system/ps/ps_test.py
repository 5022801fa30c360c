#!/usr/bin/env python3
"""The parameter service's system tests, with real daemons and ranks (ps_rank).

Cases (2 nodes x 2 ranks unless said otherwise; the model and the reference: ps_model.h and
ps_ref.c; a maximal relative difference is |service - reference| / max(|reference|, the rms of
the reference's layer)):

  equivalence_<opt>  sgd (momentum), adamw, lars, lamb: 50 steps with warmup and cosine decay of
                     a linearly scaled lr, every weight layer split across the two shards; the
                     parameters of every rank within 1e-5 of single-process training in double.
  equivalence_clip   the same with global gradient-norm clipping (every bucket of a step waits
                     for the others): lamb with a trust clamp, and sgd.
  per_bucket         lamb and adamw with the buckets of each step submitted one at a time, last
                     first, each waited for before the next goes (ps_rank --per-bucket): a
                     bucket's shard is updated without the step's other buckets, as overlap with
                     backward needs; the same 1e-5 of the reference.
  single_node        1 node x 4 ranks (the single-node path of the engine): adamw and lamb.
  state_bytes        each daemon's optimizer state (/status and /metrics) within 1% of the
                     whole model's state / nodes, for adamw (two arrays) and sgd (one).
  wire_bytes         the bytes each node sent for K service steps equal those of K ring
                     allreduces of the same gradients, plus, for lars and lamb, the exchange of
                     sums of squares (which /status counts apart and which is printed).
  checkpoint         50 steps, and 20 steps + save + a new job that loads and runs 30: the
                     parameters are bit for bit the same (lamb and sgd).
  reshard            a 2-node checkpoint of 20 steps loaded by 1 x 4 and 4 x 1 jobs, 30 more
                     steps within 1e-5 of the reference; a 1-node job given only node 0's shard
                     and a job with another registration are refused with COLL_ERR_INVALID
                     (or COLL_ERR_JOB, another rank's refusal heard first) and a message saying
                     why, on every rank.
  bad_input          a NaN gradient (COLL_ERR_INVALID naming the step and bucket, every rank),
                     ranks that register different layers (COLL_ERR_MISMATCH), an unknown
                     optimizer (COLL_ERR_INVALID), gradients in the parameters' buffer
                     (COLL_ERR_INVALID naming the overlap), a pool too small for the state
                     (COLL_ERR_POOL_FULL naming the bytes); the daemons stay up and serve a
                     fresh job.
  daemon_kill        node 1's daemon is killed (SIGKILL) during a run of steps; every rank
                     gets an error within the job's timeout + 2 s (ranks 0-1 COLL_ERR_PEER,
                     ranks 2-3 COLL_ERR_CLOSED) and none has reported a step whose parameters
                     differ from the update's (ps_rank --loop checks every step bit for bit).
  compress_<m>       fp16 (and bf16), onebit, topk: 30 steps of sgd (momentum) and lamb with
                     compressed gradients; after every step every rank's parameters within
                     COMPRESS_TOL of the reference's step from the parameters before it, whose
                     gradient is the compressed reduce-scatter of tests/model/compress_model.c
                     (each bucket's worker residuals carried over the steps, no server side)
                     and whose optimizer state is its own; the final parameters more than
                     10 x COMPRESS_TOL from the uncompressed reference (compression showed).
                     Also onebit,warmup=5 (the first 5 steps exact, then from a zero residual),
                     topk:0.1,noef, and onebit on 1 node x 4 ranks, which never compresses: the
                     parameters within TOL of the uncompressed reference.
  compress_wire_bytes  K compressed steps: the bytes each node sent, by /status (the job's
                     wire bytes, and compression.by_method, which /metrics'
                     collectived_compression_wire_bytes_total repeats), equal K x (the compressed
                     reduce-scatter + the float32 all-gather of the node's chunk + for lamb the
                     exchange of sums), computed here from the wire formats; the ratio to K
                     uncompressed ring allreduces of the same gradients is printed.
  compress_faults    a rank (on the same node, then on the other node) that asks for other
                     compression: COLL_ERR_MISMATCH on every rank naming both; powersgd and
                     auto: COLL_ERR_UNSUPPORTED; a NaN gradient with onebit: COLL_ERR_INVALID
                     naming the step, bucket and layer; the daemons then serve a compressed run.

Exit status: 0 pass, 1 fail (with the daemons' logs and the ranks' output), 77 skip.
"""

import argparse
import json
import math
import os
import re
import signal
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import check, log  # noqa: E402

TOL = 1e-5
COMPRESS_TOL = 1e-6  # the steps differ from the reference by float32 rounding: 2.7e-7 at most here
TIMEOUT_MS = 5000


class Ctx:
    def __init__(self, args, cluster):
        self.args = args
        self.c = cluster
        self.n = 0
        self.dir = tempfile.mkdtemp(prefix="ps-", dir=cluster.dir)

    def job(self, nodes, rpn, argv, env=None, timeout_ms=TIMEOUT_MS):
        self.n += 1
        return self.c.start_job("ps%d" % self.n, nodes, rpn, [self.args.rank] + argv,
                                timeout_ms=timeout_ms, env=env)


def run_ok(ctx, nodes, rpn, argv, timeout=120, env=None):
    """Run a job to its end; every rank must exit 0. Returns the job."""
    job = ctx.job(nodes, rpn, argv, env=env)
    job.release()
    job.wait_exit(timeout, expect=0)
    return job


def results(job):
    """The RESULT lines of every rank: {rank: maxrel}."""
    out = {}
    for r, p in job.ranks.items():
        ev = p.event("RESULT")
        check(ev is not None, "rank %d printed no RESULT" % r)
        out[r] = float(ev["maxrel"])
    return out


def equivalence(ctx, nodes, rpn, opt, extra=()):
    job = run_ok(ctx, nodes, rpn, ["--optimizer", opt, "--steps", "50", "--check", str(TOL)] +
                 list(extra))
    res = results(job)
    log("%s %s on %d x %d: max relative difference after 50 steps %.3g (tolerance %g)"
        % (opt, " ".join(extra), len(nodes), rpn, max(res.values()), TOL))


def case_equivalence(opt):
    def run(ctx):
        ctx.c.start_daemons(2)
        equivalence(ctx, [0, 1], 2, opt)
    return run


def case_equivalence_clip(ctx):
    ctx.c.start_daemons(2)
    equivalence(ctx, [0, 1], 2, "lamb", ["--clip", "0.5", "--trust-max", "2"])
    equivalence(ctx, [0, 1], 2, "sgd", ["--clip", "0.5"])


def case_per_bucket(ctx):
    ctx.c.start_daemons(2)
    for opt in ("lamb", "adamw"):
        equivalence(ctx, [0, 1], 2, opt, ["--per-bucket"])


def case_single_node(ctx):
    ctx.c.start_daemons(1)
    for opt in ("adamw", "lamb"):
        equivalence(ctx, [0], 4, opt)


def hold_job(ctx, opt, k, extra=()):
    """A 2 x 2 job in --bytes mode, stopped at its first phase."""
    job = ctx.job([0, 1], 2, ["--optimizer", opt, "--bytes", str(k)] + list(extra))
    job.wait_event("PHASE", timeout=60, count=1)
    return job


def go(job, count):
    for p in job.ranks.values():
        p.popen.stdin.write(b"go\n")
        p.popen.stdin.flush()
    if count is not None:
        job.wait_event("PHASE", timeout=60, count=count)


def ps_status(ctx, job):
    out = []
    for d in ctx.c.daemons:
        j = d.job(job.id)
        check(j is not None and j.get("parameter_service"), "node %d: no parameter service "
              "of job %s in /status" % (d.node, job.id))
        out.append(j)
    return out


def metric(d, name, job_id):
    code, body = h.http_get(d.status_sock, "/metrics", 3.0)
    check(code == 200, "node %d: GET /metrics answered %d" % (d.node, code))
    m = re.search(r'^%s\{job_id="%s"\} (\S+)$' % (name, re.escape(job_id)), body, re.M)
    check(m is not None, "node %d: no %s of job %s in /metrics" % (d.node, name, job_id))
    return float(m.group(1))


def case_state_bytes(ctx):
    ctx.c.start_daemons(2)
    for opt, arrays in (("adamw", 2), ("sgd", 1)):
        job = hold_job(ctx, opt, 1)
        sts = ps_status(ctx, job)
        total = sts[0]["parameter_service"]["state_bytes_total"]
        check(total == arrays * 4 * sts[0]["parameter_service"]["parameters"],
              "%s: state_bytes_total %d is not %d arrays of float32" % (opt, total, arrays))
        for d, st in zip(ctx.c.daemons, sts):
            mine = st["parameter_service"]["state_bytes"]
            dev = abs(mine - total / 2) / (total / 2)
            log("%s: node %d holds %d bytes of optimizer state, whole/nodes %.0f: %+.3f%%"
                % (opt, d.node, mine, total / 2, 100 * (mine - total / 2) / (total / 2)))
            check(dev <= 0.01, "%s: node %d's state %d bytes is %.2f%% away from %.0f"
                  % (opt, d.node, mine, 100 * dev, total / 2))
            check(metric(d, "collectived_ps_state_bytes", job.id) == mine,
                  "node %d: /metrics and /status disagree on the state bytes" % d.node)
        check(sum(s["parameter_service"]["state_bytes"] for s in sts) == total,
              "%s: the shards do not add up to the whole state" % opt)
        for _ in range(3):
            go(job, None)
        job.wait_exit(60, expect=0)


def case_wire_bytes(ctx):
    ctx.c.start_daemons(2)
    k = 5
    for opt in ("sgd", "adamw", "lars", "lamb"):
        job = hold_job(ctx, opt, k)
        before = ps_status(ctx, job)
        go(job, 2)
        mid = ps_status(ctx, job)
        go(job, 3)
        after = ps_status(ctx, job)
        go(job, None)
        job.wait_exit(60, expect=0)
        for n in range(2):
            ar = mid[n]["wire_bytes_sent"] - before[n]["wire_bytes_sent"]
            ps = after[n]["wire_bytes_sent"] - mid[n]["wire_bytes_sent"]
            ex = (after[n]["parameter_service"]["exchange_bytes"] -
                  mid[n]["parameter_service"]["exchange_bytes"])
            log("%s node %d: %d ring allreduces sent %d bytes, %d service steps %d (of which "
                "%d the exchange of sums): %.4f x the allreduces, %.4f without the exchange"
                % (opt, n, k, ar, k, ps, ex, ps / ar, (ps - ex) / ar))
            check(ps - ex == ar, "%s node %d: the steps' reduce-scatter and all-gather sent %d "
                  "bytes, the allreduces %d" % (opt, n, ps - ex, ar))
            check(ex == 0 if opt in ("sgd", "adamw") else ex > 0,
                  "%s node %d: exchange bytes %d" % (opt, n, ex))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def checkpoint_dirs(ctx, opt):
    """50 uninterrupted steps (a.bin) and a checkpoint after 20 (ck/)."""
    a = os.path.join(ctx.dir, "%s-a.bin" % opt)
    ck = os.path.join(ctx.dir, "%s-ck" % opt)
    os.mkdir(ck)
    run_ok(ctx, [0, 1], 2, ["--optimizer", opt, "--steps", "50", "--dump", a])
    run_ok(ctx, [0, 1], 2, ["--optimizer", opt, "--steps", "20", "--save", ck])
    check(sorted(os.listdir(ck)) == ["params.bin", "shard0.ckpt", "shard1.ckpt"],
          "checkpoint files: %s" % sorted(os.listdir(ck)))
    return a, ck


def case_checkpoint(ctx):
    ctx.c.start_daemons(2)
    for opt in ("lamb", "sgd"):
        a, ck = checkpoint_dirs(ctx, opt)
        c = os.path.join(ctx.dir, "%s-c.bin" % opt)
        run_ok(ctx, [0, 1], 2, ["--optimizer", opt, "--steps", "30", "--load", ck, "--dump", c])
        da, dc = read(a), read(c)
        diff = sum(1 for i in range(0, len(da), 4) if da[i:i + 4] != dc[i:i + 4])
        log("%s: 20 steps, save, load, 30 steps vs 50 steps: %d of %d parameters differ in "
            "their bits" % (opt, diff, len(da) // 4))
        check(da == dc, "%s: the resumed run differs from the uninterrupted one" % opt)


def expect_failed(job, status, pattern, ranks=None, timeout=90):
    job.release()
    job.wait_exit(timeout)
    for r, p in job.ranks.items():
        if ranks is not None and r not in ranks:
            continue
        ev = p.event("FAILED")
        check(ev is not None, "rank %d: no FAILED line:\n%s%s" % (r, p.text()[-2000:],
                                                                  p.text("err")[-2000:]))
        check(ev["status"] in status.split("|"), "rank %d: %s, expected %s: %s"
              % (r, ev["status"], status, ev.get("msg")))
        check(re.search(pattern, ev.get("msg", "")), "rank %d: the message does not say %r: %s"
              % (r, pattern, ev.get("msg")))
    log("job %s: %s as expected: %s" % (job.id, status,
                                        list(job.ranks.values())[0].event("FAILED").get("msg")))


def case_reshard(ctx):
    ctx.c.start_daemons(4)
    a, ck = checkpoint_dirs(ctx, "lamb")
    for nodes, rpn in (([0], 4), ([0, 1, 2, 3], 1)):
        job = run_ok(ctx, nodes, rpn, ["--optimizer", "lamb", "--steps", "30", "--load", ck,
                                       "--check", str(TOL)])
        log("re-shard from 2 nodes to %d x %d: max relative difference after 50 steps %.3g"
            % (len(nodes), rpn, max(results(job).values())))
    part = os.path.join(ctx.dir, "part")
    os.mkdir(part)
    for f in ("params.bin", "shard0.ckpt"):
        os.link(os.path.join(ck, f), os.path.join(part, f))
    # Every rank refuses the load itself; one that hears of another's refusal first (in the
    # load's fetch of its layout) gets COLL_ERR_JOB with that rank's reason.
    expect_failed(ctx.job([0], 4, ["--optimizer", "lamb", "--steps", "30", "--load", part]),
                  "COLL_ERR_INVALID|COLL_ERR_JOB", r"pass every node's image")
    expect_failed(ctx.job([0, 1], 2, ["--optimizer", "adamw", "--steps", "30", "--load", ck]),
                  "COLL_ERR_INVALID|COLL_ERR_JOB", r"another registration")


def case_bad_input(ctx):
    ctx.c.start_daemons(2)
    expect_failed(ctx.job([0, 1], 2, ["--optimizer", "adamw", "--fault", "nan"]),
                  "COLL_ERR_INVALID", r"step 3, bucket \d+: the gradient of layer \d+ is not "
                  r"finite")
    expect_failed(ctx.job([0, 1], 2, ["--optimizer", "lamb", "--fault", "nan"]),
                  "COLL_ERR_INVALID", r"step 3, bucket \d+: .* not finite")
    expect_failed(ctx.job([0, 1], 2, ["--optimizer", "adamw", "--fault", "mismatch"]),
                  "COLL_ERR_MISMATCH", r"ps-register")
    # Every rank refuses it itself; one that hears of another's refusal first gets COLL_ERR_JOB
    # with that rank's reason.
    expect_failed(ctx.job([0, 1], 2, ["--optimizer", "adamw", "--fault", "unknown"]),
                  "COLL_ERR_INVALID|COLL_ERR_JOB", r"unknown optimizer 7")
    # Gradients given in the parameters' buffer: refused at the call, naming the overlap.
    expect_failed(ctx.job([0, 1], 2, ["--optimizer", "sgd", "--fault", "overlap"]),
                  "COLL_ERR_INVALID|COLL_ERR_JOB", r"the gradients of bucket \d+ overlap its "
                  r"parameters")
    expect_failed(ctx.job([0, 1], 1, ["--fault", "pool", "--count", str(4 << 20)],
                          env={"COLL_POOL_SIZE": "40M"}),
                  "COLL_ERR_POOL_FULL", r"needs \d+ bytes of optimizer state")
    equivalence(ctx, [0, 1], 2, "adamw")


def case_daemon_kill(ctx):
    ctx.c.start_daemons(2)
    job = ctx.job([0, 1], 2, ["--loop", "100000", "--count", str(1 << 20)])
    job.wait_event("PROGRESS", timeout=60, count=2)
    t = time.monotonic()
    log("SIGKILL node 1's daemon (pid %d) during the steps" % ctx.c.daemons[1].pid)
    ctx.c.daemons[1].signal(signal.SIGKILL)
    job.release()
    job.wait_exit(TIMEOUT_MS / 1000 + 30)
    bound = TIMEOUT_MS / 1000 + 2 + h.SANITIZER_SLACK_S
    for r, p in job.ranks.items():
        check("WRONG" not in p.text(), "rank %d reported a step with wrong parameters:\n%s"
              % (r, p.text()[-2000:]))
        ev = p.event("FAILED")
        check(ev is not None, "rank %d: no error after the kill:\n%s" % (r, p.text()[-2000:]))
        want = "COLL_ERR_PEER" if r < 2 else "COLL_ERR_CLOSED"
        after = float(ev["t_mono"]) - t
        log("rank %d: %s %.2f s after the kill (step %s): %s" % (r, ev["status"], after,
                                                                  ev["step"], ev.get("msg")))
        check(ev["status"] == want, "rank %d: %s, expected %s" % (r, ev["status"], want))
        check(after <= bound, "rank %d: the error came %.2f s after the kill, more than %.1f s"
              % (r, after, bound))
    ctx.c.daemons[1].popen.wait(5)
    ctx.c.daemons[1].exit_code = ctx.c.daemons[1].popen.returncode


# ---- compression ------------------------------------------------------------------------------

MODEL_COUNTS = [2000, 40, 30000, 64, 5000, 10]  # ps_model.h: layers, two per bucket
BUCKETS = [MODEL_COUNTS[0] + MODEL_COUNTS[1], MODEL_COUNTS[2] + MODEL_COUNTS[3],
           MODEL_COUNTS[4] + MODEL_COUNTS[5]]
PREFIX = 144  # the exchange's descriptor and header in front of every message
HDR = 16      # compress_wire.h's header
DESC = 128    # the descriptor every operation sends to the next node


def compressed_equivalence(ctx, spec, opt, steps=30, nodes=(0, 1), rpn=2):
    job = run_ok(ctx, list(nodes), rpn, ["--optimizer", opt, "--steps", str(steps), "--check",
                                         str(COMPRESS_TOL), "--compression", spec])
    worst, apart = 0.0, None
    for r, p in job.ranks.items():
        ev = p.event("RESULT")
        check(ev is not None, "rank %d printed no RESULT" % r)
        worst = max(worst, float(ev["maxrel"]))
        apart = float(ev["apart"])
    log("%s %s on %d x %d, %d steps: max relative difference of a step from the compressed "
        "reference %.3g (tolerance %g); the parameters end %.3g from the uncompressed reference"
        % (spec, opt, len(nodes), rpn, steps, worst, COMPRESS_TOL, apart))
    if len(nodes) == 1:
        check(apart <= TOL, "%s %s on one node: %.3g from the uncompressed reference, which it "
              "should be within %g of (one node never compresses)" % (spec, opt, apart, TOL))
    else:
        check(apart > 10 * COMPRESS_TOL, "%s %s: the parameters are only %.3g from the "
              "uncompressed reference: the test would not see compression" % (spec, opt, apart))


def case_compress(specs, extra):
    def run(ctx):
        ctx.c.start_daemons(2)
        for spec in specs:
            for opt in ("sgd", "lamb"):
                compressed_equivalence(ctx, spec, opt)
        for spec, nodes, rpn in extra:
            compressed_equivalence(ctx, spec, "sgd", nodes=nodes, rpn=rpn)
    return run


def chunks(count, nodes=2):
    """plan.h: chunks of ceil(count / nodes) rounded up to 16 float32 (a 64-byte line)."""
    per = -(-count // nodes)
    per = -(-per // 16) * 16
    return [max(0, min(count, (c + 1) * per) - min(count, c * per)) for c in range(nodes)]


def topk_k(count, ratio):
    return max(1, math.ceil(ratio * count))


def index_bytes(count):
    return 1 if count <= 1 << 8 else 2 if count <= 1 << 16 else 3 if count <= 1 << 24 else 4


def step_bytes(spec, opt, node, nodes=2):
    """Bytes node @node sends in one compressed step of every bucket (data, no descriptor)."""
    total = 0
    for count in BUCKETS:
        ch = chunks(count, nodes)
        others = [p for p in range(nodes) if p != node]
        if spec.startswith("topk:"):
            k = topk_k(count, float(spec.split(":")[1]))
            total += len(others) * (PREFIX + HDR + (4 + index_bytes(count)) * k)
        else:
            per = (lambda n: HDR + -(-n // 8)) if spec == "onebit" else (lambda n: HDR + 2 * n)
            total += sum(PREFIX + per(ch[p]) for p in others)
        total += len(others) * (PREFIX + HDR + 4 * ch[node])  # the float32 all-gather
        if opt in ("lars", "lamb"):
            total += len(others) * 16 * 2  # the sums of the bucket's two layers
    return total


def by_method(st, method):
    m = st.get("compression", {}).get("by_method", {}).get(method)
    return m if m is not None else {"operations": 0, "wire_bytes": 0, "dense_bytes": 0}


def method_metric(d, name, job_id, method):
    code, body = h.http_get(d.status_sock, "/metrics", 3.0)
    check(code == 200, "node %d: GET /metrics answered %d" % (d.node, code))
    m = re.search(r'^%s\{job_id="%s",method="%s"\} (\S+)$' % (name, re.escape(job_id), method),
                  body, re.M)
    check(m is not None, "node %d: no %s of job %s, method %s" % (d.node, name, job_id, method))
    return float(m.group(1))


def case_compress_wire_bytes(ctx):
    ctx.c.start_daemons(2)
    k = 5
    for opt, spec in (("sgd", "fp16"), ("sgd", "onebit"), ("lamb", "onebit"),
                      ("sgd", "topk:0.03")):
        method = spec.split(":")[0]
        job = hold_job(ctx, opt, k, ["--compression", spec])
        before = ps_status(ctx, job)
        go(job, 2)
        mid = ps_status(ctx, job)
        go(job, 3)
        after = ps_status(ctx, job)
        metrics = [method_metric(d, "collectived_compression_wire_bytes_total", job.id, method)
                   for d in ctx.c.daemons]
        go(job, None)
        job.wait_exit(60, expect=0)
        for n in range(2):
            check(metrics[n] == by_method(after[n], method)["wire_bytes"],
                  "node %d: /metrics says %d wire bytes of %s, /status %d"
                  % (n, metrics[n], method, by_method(after[n], method)["wire_bytes"]))
            ar = mid[n]["wire_bytes_sent"] - before[n]["wire_bytes_sent"]
            ps = after[n]["wire_bytes_sent"] - mid[n]["wire_bytes_sent"]
            a, b = by_method(mid[n], method), by_method(after[n], method)
            want = k * step_bytes(spec, opt, n)
            dense = k * sum(4 * c for c in BUCKETS)
            log("%s %s node %d: %d steps sent %d bytes (%d of data, expected %d), %d ring "
                "allreduces %d: %.4f x; compression.by_method.%s: %d operations, %d wire, %d "
                "dense bytes" % (spec, opt, n, k, ps, b["wire_bytes"] - a["wire_bytes"], want, k,
                                 ar, ps / ar, method, b["operations"] - a["operations"],
                                 b["wire_bytes"] - a["wire_bytes"],
                                 b["dense_bytes"] - a["dense_bytes"]))
            check(b["wire_bytes"] - a["wire_bytes"] == want, "%s %s node %d: the steps sent %d "
                  "bytes of data, expected %d" % (spec, opt, n, b["wire_bytes"] - a["wire_bytes"],
                                                 want))
            check(ps == want + k * len(BUCKETS) * DESC, "%s %s node %d: the job's wire bytes %d, "
                  "expected %d" % (spec, opt, n, ps, want + k * len(BUCKETS) * DESC))
            check(b["operations"] - a["operations"] == k * len(BUCKETS) and
                  b["dense_bytes"] - a["dense_bytes"] == dense,
                  "%s %s node %d: by_method counts %d operations and %d dense bytes"
                  % (spec, opt, n, b["operations"] - a["operations"],
                     b["dense_bytes"] - a["dense_bytes"]))


def case_compress_faults(ctx):
    ctx.c.start_daemons(2)
    for fault in ("compression", "compression-node"):
        expect_failed(ctx.job([0, 1], 2, ["--optimizer", "sgd", "--compression", "onebit",
                                          "--fault", fault]),
                      "COLL_ERR_MISMATCH", r"compression=(onebit|fp16).*compression=(onebit|fp16)"
                      r"|disagree on the count, datatype or compression")
    for spec, name in (("powersgd:2", "powersgd"), ("auto", "auto")):
        expect_failed(ctx.job([0, 1], 2, ["--optimizer", "sgd", "--compression", spec]),
                      "COLL_ERR_UNSUPPORTED|COLL_ERR_JOB", r"not %s" % name)
    expect_failed(ctx.job([0, 1], 2, ["--optimizer", "adamw", "--compression", "onebit",
                                      "--fault", "nan"]),
                  "COLL_ERR_INVALID", r"step 3, bucket \d+: the gradient of layer \d+ is not "
                  r"finite")
    compressed_equivalence(ctx, "onebit", "sgd", steps=10)


CASES = {"equivalence_%s" % o: case_equivalence(o) for o in ("sgd", "adamw", "lars", "lamb")}
CASES.update({"compress_fp16": case_compress(("fp16", "bf16"), ()),
              "compress_onebit": case_compress(("onebit",), (("onebit,warmup=5", (0, 1), 2),
                                                             ("onebit", (0,), 4))),
              "compress_topk": case_compress(("topk:0.1",), (("topk:0.1,noef", (0, 1), 2),)),
              "compress_wire_bytes": case_compress_wire_bytes,
              "compress_faults": case_compress_faults})
CASES.update({"equivalence_clip": case_equivalence_clip, "per_bucket": case_per_bucket,
              "single_node": case_single_node,
              "state_bytes": case_state_bytes, "wire_bytes": case_wire_bytes,
              "checkpoint": case_checkpoint, "reshard": case_reshard,
              "bad_input": case_bad_input, "daemon_kill": case_daemon_kill})


def parser():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemon", required=True, help="collectived binary")
    p.add_argument("--rank", required=True, help="ps_rank binary")
    p.add_argument("--case", required=True, choices=sorted(CASES))
    p.add_argument("--dump", action="store_true", help="print logs also when the test passes")
    return p


def body(args, cluster):
    ctx = Ctx(args, cluster)
    CASES[args.case](ctx)
    cluster.check_no_crash()


if __name__ == "__main__":
    p = parser()
    h.main(body, p, cluster=p.parse_known_args()[0].case)
