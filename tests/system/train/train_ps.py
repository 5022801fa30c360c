#!/usr/bin/env python3
"""coll-train --service (the optimizer in the daemons' parameter service) ends with the weights
of the same run without --service (the trainer's own optimizer after the bucketed allreduce),
on 2 nodes x 2 ranks, up to float32 summation order; and --service is refused where it cannot
work.

--check equivalence, per optimizer (SGD with Nesterov momentum and weight decay, LAMB with a
trust clamp that binds, gradient clipping and a warmup, LARS with a warmup, AdamW) on
784-128-64-10 (six tensors in three buckets, the biases excluded for LARS and LAMB) for --steps
steps (default 20) at global batch 512:
  - normwise max|svc - ref| / max|ref| <= the optimizer's tolerance (svc: --service, ref: the
    same options without it);
  - the control: the run without --service but with one setting changed (the weight decay, or
    the trust clamp, eta) lands at least 20 x the tolerance away from svc, so a setting
    that the service dropped or mapped wrongly would fail the comparison;
  - the weights moved from their initial values by at least 20 x the tolerance;
  - both runs had 2 nodes and 4 ranks, no daemon or UCX warning.

Tolerance. Both runs average the same four per-rank gradients, but in different orders: the
bucketer's allreduce adds them as its ring over the nodes goes, the service reduce-scatters
across the local ranks first and then across the nodes. The mean is the same, rounded
differently: about one float32 ulp (6e-8 relative) per element (on 1 node x 2 ranks, where
both orders agree, the two runs are bit-identical). The norms LARS and LAMB need are sums of
squares in double, per shard then summed: 1e-16, negligible. The updates are continuous in the
gradient, so after 20 steps the weights differ by a few ulps: measured 1.2e-7 to 2.1e-7 on this
machine for the four optimizers; 1e-5 leaves almost two orders of magnitude, while the
controls are at 0.03 to 0.9. One thing is not continuous: a ReLU whose pre-activation for some
image is within rounding of zero flips with a one-ulp change, and the unit's gradient jumps.
With --seed 1, SGD meets one at step 15 (fc0 row 3; 1.8e-7 at step 14, 1.9e-5 at 15, 1e-3 at
20); --seed 2 meets none in 20 steps for these settings, so the test uses it.

--check compression: --service --compression fp16 and onebit (SGD as above): the bytes each
step sent (the epoch line's wire_mb_per_step, from coll_req_wire_bytes()) are those of the
compressed reduce-scatter plus the float32 all-gather of node 0's chunks, computed here from the
wire formats; the weights differ from the uncompressed --service run's (normwise > 1e-6:
compression ran) and the test accuracy is within ACCURACY_MARGIN of that run's (measured:
0.7515 uncompressed, 0.7514 fp16, 0.7536 onebit). The algorithm itself is checked step by step
against its reference by tests/system/ps (ps_compress_*).

--check usage: --service with --tp 2 and with --compression powersgd:2 exits 2 with a message
naming the option, and a standalone --service run (no daemons) exits 2 saying it needs a job.
"""

import math
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness  # noqa: E402
from harness import TestFailure  # noqa: E402
import equivalence  # noqa: E402  (load, normwise)

NET = ["--hidden", "128,64", "--batch", "512", "--seed", "2"]
# name, options, the control's change of one setting, tolerance (see the docstring)
OPTIMIZERS = [
    ("sgd", ["--optimizer", "sgd", "--lr", "0.05", "--nesterov", "--weight-decay", "5e-4"],
     ["--weight-decay", "5e-2"], 1e-5),
    ("lamb", ["--optimizer", "lamb", "--lr", "0.01", "--trust-clamp", "0.1,10",
              "--clip-grad-norm", "1", "--warmup", "5"], ["--trust-clamp", "0.01,10"], 1e-5),
    ("lars", ["--optimizer", "lars", "--lr", "5", "--warmup", "5"], ["--lars-eta", "0.002"],
     1e-5),
    ("adamw", ["--optimizer", "adamw", "--lr", "0.002"], ["--weight-decay", "0.5"], 1e-5),
]


def two_by_two(args, dump, extra):
    rc, lines = harness.launch(args, 2, 2, [args.train, "--dump-weights", dump,
                                            "--eval-every", "0"] + extra)
    if rc != 0:
        raise TestFailure("collective-launch exited with %d" % rc)
    harness.expect_fields(harness.final_fields(lines), nodes=2, ranks=4)
    harness.check_no_warnings(lines)
    return lines


def check(name, init, ref, svc, control, tol):
    w0, r, s, c = (equivalence.load(p) for p in (init, ref, svc, control))
    if not len(w0) == len(r) == len(s) == len(c):
        raise TestFailure("%s: weight files differ in size" % name)
    rel, worst = equivalence.normwise(s, r)
    moved, _ = equivalence.normwise(r, w0)
    off, _ = equivalence.normwise(c, s)
    harness.log("%s: --service vs the trainer's optimizer %.3g (limit %g; worst at %d: %.9g vs "
                "%.9g); moved %.3g from init; control %.3g" % (name, rel, tol, worst, s[worst],
                                                               r[worst], moved, off))
    if not rel <= tol:
        raise TestFailure("%s: --service weights differ from the trainer's by %.3g > %g"
                          % (name, rel, tol))
    equivalence.require_separation(name, moved, off, tol)


def equivalence_runs(args, tmp):
    steps = ["--steps", str(args.steps)]
    init = os.path.join(tmp, "init.f32")
    rc, _ = harness.run([args.train, "--dump-weights", init, "--eval-every", "0", "--steps",
                         "1", "--lr", "1e-12", "--momentum", "0"] + NET, args.timeout, check=False)
    if rc != 0:
        raise TestFailure("standalone coll-train exited with %d" % rc)
    for name, opts, change, tol in OPTIMIZERS:
        ref, svc, control = (os.path.join(tmp, "%s-%s.f32" % (name, k))
                             for k in ("ref", "svc", "control"))
        two_by_two(args, ref, NET + steps + opts)
        lines = two_by_two(args, svc, NET + steps + opts + ["--service"])
        if not any("in the parameter service" in line for line in lines):
            raise TestFailure("%s: the --service run does not say it used the service" % name)
        two_by_two(args, control, NET + steps + opts + change)
        check(name, init, ref, svc, control, tol)


# 784-128-64-10: one bucket per network layer, weight and bias
SERVICE_BUCKETS = [784 * 128 + 128, 128 * 64 + 64, 64 * 10 + 10]
COMPRESSIONS = ["fp16", "onebit"]
ACCURACY_MARGIN = 0.02


def step_bytes(spec, node=0, nodes=2):
    """Bytes node @node sends per step: each other node's chunk of every bucket encoded, behind
    the 144-byte prefix and a 16-byte header, then its own chunk in float32 to each other node
    (docs/parameter-service.md); chunks of ceil(count / nodes) rounded up to 16 elements."""
    total = 0
    for count in SERVICE_BUCKETS:
        per = math.ceil(math.ceil(count / nodes) / 16) * 16
        ch = [max(0, min(count, (c + 1) * per) - min(count, c * per)) for c in range(nodes)]
        enc = (lambda n: 16 + math.ceil(n / 8)) if spec == "onebit" else (lambda n: 16 + 2 * n)
        total += sum(144 + enc(ch[p]) for p in range(nodes) if p != node)
        total += (nodes - 1) * (144 + 16 + 4 * ch[node])
    return total


def last_field(lines, name):
    vals = [float(m.group(1)) for m in (re.search(r"\b%s=(\S+)" % name, ln) for ln in lines)
            if m]
    if not vals:
        raise TestFailure("no %s in the output" % name)
    return vals[-1]


def compression_runs(args, tmp):
    steps = ["--steps", str(args.steps)]
    opts = OPTIMIZERS[0][1]
    ref = os.path.join(tmp, "svc.f32")
    acc = last_field(two_by_two(args, ref, NET + steps + opts + ["--service"]), "test_accuracy")
    for spec in COMPRESSIONS:
        out = os.path.join(tmp, "svc-%s.f32" % spec)
        lines = two_by_two(args, out, NET + steps + opts + ["--service", "--compression", spec])
        mb, want = last_field(lines, "wire_mb_per_step"), step_bytes(spec) / 1e6
        rel, _ = equivalence.normwise(equivalence.load(out), equivalence.load(ref))
        got = last_field(lines, "test_accuracy")
        harness.log("--service --compression %s: %.4f MB per step on node 0 (expected %.4f), "
                    "ratio %.2f; weights %.3g from the uncompressed --service run, test "
                    "accuracy %.4f (uncompressed %.4f)"
                    % (spec, mb, want, last_field(lines, "compression_ratio"), rel, got, acc))
        if abs(mb - want) > 0.6e-4:
            raise TestFailure("%s: %.4f MB per step, expected %.4f" % (spec, mb, want))
        if not rel > 1e-6 or abs(got - acc) > ACCURACY_MARGIN:
            raise TestFailure("%s: weights %.3g from the uncompressed run (want > 1e-6), test "
                              "accuracy %.4f against %.4f (margin %g)"
                              % (spec, rel, got, acc, ACCURACY_MARGIN))


def expect_usage_error(lines, rc, words, what):
    text = "\n".join(lines)
    if rc != 2 or not all(w in text for w in words):
        raise TestFailure("%s: exit %d (want 2) and output without %s:\n%s"
                          % (what, rc, " and ".join(repr(w) for w in words), text))
    harness.log("%s: exit 2: %s" % (what, [line for line in lines if words[0] in line][0]))


def usage_runs(args):
    for extra, option in ((["--tp", "2"], "--tp"),
                          (["--compression", "powersgd:2"], "--compression powersgd")):
        rc, text = harness.run([args.train, "--service", "--steps", "1"] + extra, args.timeout,
                               check=False)
        lines = text.splitlines()
        expect_usage_error(lines, rc, ["--service cannot be used with " + option], option)
    rc, text = harness.run([args.train, "--service", "--steps", "1"] + NET, args.timeout,
                           check=False)
    lines = text.splitlines()
    expect_usage_error(lines, rc, ["--service needs a job"], "standalone")


def main():
    p = harness.launch_parser(__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="coll-train binary")
    p.add_argument("--check", choices=("equivalence", "compression", "usage"), required=True)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    if args.check == "usage":
        harness.main(lambda: usage_runs(args))
        return
    harness.dataset_or_skip()
    runs = equivalence_runs if args.check == "equivalence" else compression_runs
    with tempfile.TemporaryDirectory(prefix="coll-optim-service-") as tmp:
        harness.main(lambda: runs(args, tmp))


if __name__ == "__main__":
    main()
