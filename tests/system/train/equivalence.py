#!/usr/bin/env python3
"""Data-parallel equivalence: coll-train on 4 ranks over 2 daemons (global batch 256, each rank
64 images, gradients averaged with COLL_AVG) must end with the same weights as one standalone
process with batch 256, up to float32 summation order.

Checks, on raw float32 weight dumps:
  - standalone vs data-parallel: normwise max|a-b| / max|b| <= --tolerance (b: standalone);
    the elementwise max |a-b| / (|b| + 1e-3) is reported too;
  - training moved the weights: max|b-init| / max|init| is far above the tolerance (init: one
    step with lr 1e-12, as coll-train refuses --steps 0), so a run that does nothing fails;
  - no NaN or infinity, equal sizes, the distributed run really had 2 nodes and 4 ranks, and no
    daemon or UCX warning.
"""

import array
import math
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness  # noqa: E402
from harness import TestFailure  # noqa: E402

MIN_CHANGE = 0.1  # training must move the weights by this much (normwise, relative to init)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) == 0 or len(data) % 4 != 0:
        raise TestFailure("%s: %d bytes, not a non-empty float32 array" % (path, len(data)))
    a = array.array("f")
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    bad = [i for i, x in enumerate(a) if not math.isfinite(x)]
    if bad:
        raise TestFailure("%s: %d non-finite values, first at %d" % (path, len(bad), bad[0]))
    return a


# The distance the weights moved and the control's distance must exceed this many tolerances,
# or a comparison within the tolerance proves nothing.
SEPARATION = 20


def require_separation(name, moved, control, tol):
    """Raise TestFailure unless training moved the weights by @moved and the control run lies
    @control away, both at least SEPARATION x @tol."""
    if moved < SEPARATION * tol or control < SEPARATION * tol:
        raise TestFailure("%s: training moved the weights by %.3g and the control is %.3g "
                          "away: below %d x %g, the comparison proves nothing"
                          % (name, moved, control, SEPARATION, tol))


def normwise(a, b):
    """max|a-b| / max|b|, and the index of the largest difference."""
    worst = max(range(len(a)), key=lambda i: abs(a[i] - b[i]))
    scale = max(abs(x) for x in b)
    return abs(a[worst] - b[worst]) / scale, worst


def elementwise(a, b):
    return max(abs(x - y) / (abs(y) + 1e-3) for x, y in zip(a, b))


def train_standalone(args, steps, dump, extra=()):
    rc, text = harness.run([args.train, "--steps", str(steps), "--dump-weights", dump] +
                           list(extra), args.timeout, check=False)
    lines = text.splitlines()
    if rc != 0:
        raise TestFailure("standalone coll-train exited with %d" % rc)
    harness.expect_fields(harness.final_fields(lines), nodes=1, ranks=1)


def train_distributed(args, dump):
    rc, lines = harness.launch(args, 2, 2, [args.train, "--steps", str(args.steps),
                                            "--dump-weights", dump])
    if rc != 0:
        raise TestFailure("collective-launch exited with %d" % rc)
    harness.expect_fields(harness.final_fields(lines), nodes=2, ranks=4)
    harness.check_no_warnings(lines)


def compare(init_path, ref_path, dp_path, tolerance, name="data-parallel"):
    init, ref, dp = load(init_path), load(ref_path), load(dp_path)
    if not len(init) == len(ref) == len(dp):
        raise TestFailure("weight files differ in size: init %d, standalone %d, data-parallel "
                          "%d floats" % (len(init), len(ref), len(dp)))
    change, _ = normwise(ref, init)
    rel, worst = normwise(dp, ref)
    harness.log("%d parameters; training moved the weights by %.3g (normwise, relative to "
                "init)" % (len(ref), change))
    harness.log("%s vs standalone: normwise %.3g (limit %g), worst at %d: %.9g vs "
                "%.9g; elementwise max |a-b|/(|b|+1e-3) %.3g"
                % (name, rel, tolerance, worst, dp[worst], ref[worst], elementwise(dp, ref)))
    if change < MIN_CHANGE:
        raise TestFailure("training changed the weights by only %.3g (< %g): the comparison "
                          "would prove nothing" % (change, MIN_CHANGE))
    if not rel <= tolerance:
        raise TestFailure("%s weights differ from standalone: normwise %.3g > %g"
                          % (name, rel, tolerance))


def main():
    p = harness.launch_parser(__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="coll-train binary")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--tolerance", type=float, default=1e-4)
    args = p.parse_args()
    harness.dataset_or_skip()
    with tempfile.TemporaryDirectory(prefix="coll-equivalence-") as tmp:
        init = os.path.join(tmp, "init.f32")
        ref = os.path.join(tmp, "standalone.f32")
        dp = os.path.join(tmp, "dataparallel.f32")
        harness.main(lambda: (train_standalone(args, 1, init, ["--lr", "1e-12"]),
                              train_standalone(args, args.steps, ref),
                              train_distributed(args, dp),
                              compare(init, ref, dp, args.tolerance)))


if __name__ == "__main__":
    main()
