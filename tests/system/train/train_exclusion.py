#!/usr/bin/env python3
"""An excluded tensor gets no trust ratio: coll-train --optimizer lars applies to the biases
(excluded by default) the plain update w - lr g, and to the weights the trust-scaled update,
each as computed here from the weights and gradients the trainer dumped.

LARS with momentum 0 (v = lr_s d, w = w - v: one step needs only that step's weights and
gradient), lr 50, eta 1e-3, weight decay 1e-3, 784-32-10, batch 256. Step 1 cannot tell an
excluded bias from another (biases start at 0, and a zero norm gives trust 1 either way), so
the check is on step 2: w1 from --steps 1, w2 and g2 (the gradient step 2 used, computed at
w1) from --steps 2 --dump-grads. Per tensor, in double:
  trust = eta ||w1|| / (||g2|| + wd ||w1|| + eps);   trust-scaled: w1 - lr trust (g2 + wd w1)
  excluded (no trust ratio, no decay):            w1 - lr g2
Checks, with err = max|w2 - expected| / max|w2 - w1| (float32 rounding: about 1e-6):
  - default: weights match trust-scaled (err <= 1e-4), biases match excluded (err <= 1e-4) and
    are far from what trust scaling would have given them (err >= 0.1; their trust here
    would be about 0.03);
  - --exclude none: the biases now match trust-scaled and not excluded, the same way;
  - the trust ratios --report-layers prints for step 2: 1 for every excluded bias, the value
    computed here for the others (relative 1e-5).
"""

import array
import math
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness  # noqa: E402
from harness import TestFailure  # noqa: E402
import equivalence  # noqa: E402  (load)

SIZES = [784, 32, 10]
LR, ETA, WD, EPS = 50.0, 1e-3, 1e-3, 1e-7
TRAIN = ["--hidden", "32", "--optimizer", "lars", "--momentum", "0", "--lr", str(LR),
         "--lars-eta", str(ETA), "--weight-decay", str(WD), "--eps", str(EPS)]
LAYER_LINE = re.compile(r"^layer step=2 tensor=(\S+) .* trust=(\S+) ")
MATCH, MISS = 1e-4, 0.1


def tensors(flat):
    """(name, list) per tensor in the dump layout of coll-train."""
    out, off = [], 0
    for l in range(len(SIZES) - 1):
        for name, n in (("fc%d.weight" % l, SIZES[l] * SIZES[l + 1]),
                        ("fc%d.bias" % l, SIZES[l + 1])):
            out.append((name, flat[off:off + n]))
            off += n
    if off != len(flat):
        raise TestFailure("dump of %d floats, the network has %d" % (len(flat), off))
    return out


def norm(x):
    return math.sqrt(sum(v * v for v in x))


def trust_of(w, g):
    return ETA * norm(w) / (norm(g) + WD * norm(w) + EPS)


def expected(w, g, scaled):
    if not scaled:
        return [wi - LR * gi for wi, gi in zip(w, g)]
    t = trust_of(w, g)
    return [wi - LR * t * (gi + WD * wi) for wi, gi in zip(w, g)]


def err(w2, want, w1):
    step = max(abs(a - b) for a, b in zip(w2, w1))
    return max(abs(a - b) for a, b in zip(w2, want)) / step


def train(args, tmp, tag, extra):
    w1, w2, g2 = (os.path.join(tmp, "%s-%s.f32" % (tag, k)) for k in ("w1", "w2", "g2"))
    for cmd in ([args.train, "--steps", "1", "--dump-weights", w1] + TRAIN + extra,
                [args.train, "--steps", "2", "--dump-weights", w2, "--dump-grads", g2,
                 "--report-layers", "2"] + TRAIN + extra):
        rc, text = harness.run(cmd, args.timeout, echo=False, check=False)
        lines = text.splitlines()
        if rc != 0:
            sys.stdout.write("\n".join(lines) + "\n")
            raise TestFailure("coll-train exited with %d" % rc)
    trusts = {m.group(1): float(m.group(2)) for m in map(LAYER_LINE.match, lines) if m}
    return [tensors(array.array("f", equivalence.load(p))) for p in (w1, w2, g2)], trusts


def check_tensor(tag, name, w1, w2, g2, scaled):
    right, wrong = err(w2, expected(w1, g2, scaled), w1), err(w2, expected(w1, g2, not scaled), w1)
    harness.log("%s: %s: err %.2g against the %s update, %.2g against the other"
                % (tag, name, right, "trust-scaled" if scaled else "excluded", wrong))
    if not right <= MATCH:
        raise TestFailure("%s: %s does not follow the %s update (err %.3g > %g)"
                          % (tag, name, "trust-scaled" if scaled else "excluded", right, MATCH))
    if not wrong >= MISS:
        raise TestFailure("%s: %s: the two updates differ by only %.3g: the check cannot tell "
                          "them apart" % (tag, name, wrong))


def check_trusts(tag, trusts, w1s, g2s, exclude_bias):
    for (name, w1), (_, g2) in zip(w1s, g2s):
        want = 1.0 if exclude_bias and name.endswith(".bias") else trust_of(w1, g2)
        got = trusts.get(name)
        if got is None or not abs(got - want) <= 1e-5 * want:
            raise TestFailure("%s: --report-layers gives %s trust %s at step 2, expected %.6g"
                              % (tag, name, got, want))


def run(args, tmp):
    for tag, extra, exclude_bias in (("default", [], True), ("--exclude none",
                                                             ["--exclude", "none"], False)):
        (w1s, w2s, g2s), trusts = train(args, tmp, tag.replace(" ", "_"), extra)
        for (name, w1), (_, w2), (_, g2) in zip(w1s, w2s, g2s):
            bias = name.endswith(".bias")
            check_tensor(tag, name, w1, w2, g2, scaled=not (bias and exclude_bias))
        check_trusts(tag, trusts, w1s, g2s, exclude_bias)


def main():
    p = harness.launch_parser(__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="coll-train binary")
    args = p.parse_args()
    harness.dataset_or_skip()
    with tempfile.TemporaryDirectory(prefix="coll-optim-exclusion-") as tmp:
        harness.main(lambda: run(args, tmp))


if __name__ == "__main__":
    main()
