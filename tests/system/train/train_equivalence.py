#!/usr/bin/env python3
"""Each optimizer of coll-train on 1 node x 2 ranks (each rank half of the global batch of 512,
gradients averaged by the daemon with COLL_AVG) ends with the weights of one standalone process
training on the whole batch of 512, up to float32 summation order.

Per optimizer (SGD with Nesterov momentum and weight decay, AdamW, LARS with a warmup, LAMB
with a trust clamp and gradient clipping), on 784-128-64-10 (six tensors) for --steps steps:
  - normwise max|dp - ref| / max|ref| <= --tolerance (dp: the 2-rank weights, ref: standalone);
  - the control: a standalone run with batch 256 (other gradients: what a rank would get
    without the allreduce, or with the sum instead of the average for an adaptive optimizer
    aside) lands at least 100 x --tolerance away from ref, so the tolerance tells a right
    run from a wrong one;
  - the weights moved from their initial values by at least 100 x --tolerance (normwise);
  - no NaN or infinity, the 2-rank run had 1 node and 2 ranks, no daemon or UCX warning.

Tolerance. Standalone averages the per-image gradients of 512 images in one float32 sum; the
2-rank run sums 256 on each rank, divides by 256, and the daemon averages the two: the same
mathematical mean, rounded differently (a few float32 ulps, 1e-7 relative per element). The
updates are continuous in the gradient (LARS and LAMB through norms of whole tensors, AdamW
and LAMB through m / sqrt(v), whose relative error is that of g), so after a few steps the
weights differ by a small multiple of that: measured 2e-8 to 1.2e-7 for 5 steps on this
machine. --tolerance 1e-5 leaves two orders of magnitude for other BLAS kernels and summation
orders, while the control runs are at 1e-3 to 1e-1.
"""

import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness  # noqa: E402
from harness import TestFailure  # noqa: E402
import equivalence  # noqa: E402  (load, normwise)

NET = ["--hidden", "128,64", "--batch", "512"]
# name, options, tolerance (see the docstring)
OPTIMIZERS = [
    ("sgd", ["--optimizer", "sgd", "--lr", "0.05", "--nesterov", "--weight-decay", "5e-4"],
     1e-5),
    ("adamw", ["--optimizer", "adamw", "--lr", "0.002"], 1e-3),
    ("lars", ["--optimizer", "lars", "--lr", "5", "--warmup", "2"], 1e-5),
    ("lamb", ["--optimizer", "lamb", "--lr", "0.01", "--trust-clamp", "0.01,10",
              "--clip-grad-norm", "1"], 1e-3),
]


def standalone(args, dump, extra):
    rc, text = harness.run([args.train, "--dump-weights", dump] + extra, args.timeout, check=False)
    lines = text.splitlines()
    if rc != 0:
        raise TestFailure("standalone coll-train exited with %d" % rc)
    harness.expect_fields(harness.final_fields(lines), nodes=1, ranks=1)


def two_ranks(args, dump, extra):
    rc, lines = harness.launch(args, 1, 2, [args.train, "--dump-weights", dump] + extra)
    if rc != 0:
        raise TestFailure("collective-launch exited with %d" % rc)
    harness.expect_fields(harness.final_fields(lines), nodes=1, ranks=2)
    harness.check_no_warnings(lines)


def check(name, init, ref, dp, control, tol):
    w0, r, d, c = (equivalence.load(p) for p in (init, ref, dp, control))
    if not len(w0) == len(r) == len(d) == len(c):
        raise TestFailure("%s: weight files differ in size" % name)
    rel, worst = equivalence.normwise(d, r)
    moved, _ = equivalence.normwise(r, w0)
    off, _ = equivalence.normwise(c, r)
    harness.log("%s: 2 ranks vs standalone %.3g (limit %g; worst at %d: %.9g vs %.9g); "
                "moved %.3g from init; control (batch 256) %.3g"
                % (name, rel, tol, worst, d[worst], r[worst], moved, off))
    if not rel <= tol:
        raise TestFailure("%s: 2-rank weights differ from standalone by %.3g > %g"
                          % (name, rel, tol))
    equivalence.require_separation(name, moved, off, tol)


def run(args, tmp):
    steps = ["--steps", str(args.steps)]
    init = os.path.join(tmp, "init.f32")
    standalone(args, init, NET + ["--steps", "1", "--lr", "1e-12", "--momentum", "0"])
    for name, opts, tol in OPTIMIZERS:
        ref, dp, control = (os.path.join(tmp, "%s-%s.f32" % (name, k))
                            for k in ("ref", "dp", "control"))
        standalone(args, ref, NET + steps + opts)
        two_ranks(args, dp, NET + steps + opts)
        standalone(args, control, NET + steps + opts + ["--batch", "256"])
        check(name, init, ref, dp, control, tol * args.tolerance_scale)


def main():
    p = harness.launch_parser(__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="coll-train binary")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--tolerance-scale", type=float, default=1.0,
                   help="multiplies every optimizer's tolerance (default 1)")
    args = p.parse_args()
    harness.dataset_or_skip()
    with tempfile.TemporaryDirectory(prefix="coll-optim-equivalence-") as tmp:
        harness.main(lambda: run(args, tmp))


if __name__ == "__main__":
    main()
