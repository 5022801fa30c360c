#!/usr/bin/env python3
"""The learning rates coll-train uses are those of coll_schedule_lr(): the "lr step=S lr=X" lines
of --report-lr must equal, digit for digit (17 significant digits of the same double), what
lr_ref prints for the same schedule written field by field, with the trainer's epochs converted
to steps here (60000 / 6000 = 10 steps per epoch). Chosen steps are also checked against
learning rates computed by hand in this file (relative 1e-12), and each epoch line's lr= against
the lr of that epoch's last step (6 significant digits).

Two schedules, on a tiny network (784-16-10, batch 6000: each step takes milliseconds):
  - linear scaling 0.1 x 6000/256 = 2.34375, warmup over 2 epochs from the base lr 0.1 (Goyal et
    al.), step decay x0.1 at epochs 3 and 4 (steps 30 and 40), 5 epochs;
  - lr 0.5 without scaling, warmup over 5 steps from 0 (the trainer's start without scaling),
    cosine decay to 0.01 over the 45 steps of --steps 45.
"""

import math
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness  # noqa: E402
from harness import TestFailure  # noqa: E402

NET = ["--hidden", "16", "--batch", "6000", "--report-lr"]
LR_LINE = re.compile(r"^lr step=(\d+) lr=(\S+)$")
EPOCH_LINE = re.compile(r"^epoch (\d+)/\d+ loss=\S+ lr=(\S+) ")
STEPS_PER_EPOCH = 10

GOYAL = {
    "train": ["--epochs", "5", "--lr-scaling", "linear", "--base-lr", "0.1", "--base-batch",
              "256", "--warmup", "2ep", "--decay", "step", "--milestones", "3ep,4ep",
              "--gamma", "0.1"],
    "ref": ["0.1", "scale", "256", "6000", "warmup", "20", "step", "0.1", "30,40"],
    "steps": 50,
    # step (0-based) -> lr by hand: base lr at 0, half way through the warmup at 10, the peak
    # 0.1 x 6000/256 from 20, then x0.1 and x0.01.
    "hand": {0: 0.1, 10: 0.1 + (2.34375 - 0.1) * 0.5, 19: 0.1 + (2.34375 - 0.1) * 19 / 20,
             20: 2.34375, 29: 2.34375, 30: 0.234375, 39: 0.234375, 40: 0.0234375,
             49: 0.0234375},
}
COSINE = {
    "train": ["--epochs", "5", "--steps", "45", "--lr", "0.5", "--warmup", "5", "--decay",
              "cosine", "--final-lr", "0.01"],
    "ref": ["0.5", "warmup", "5", "0", "cosine", "45", "0.01"],
    "steps": 45,
    "hand": {0: 0.0, 1: 0.1, 4: 0.4, 5: 0.5, 25: (0.5 + 0.01) / 2,
             44: 0.01 + (0.5 - 0.01) * (1 + math.cos(math.pi * 39 / 40)) / 2},
}


def trainer_lrs(args, case):
    rc, text = harness.run([args.train] + NET + case["train"], args.timeout, echo=False,
                           check=False)
    lines = text.splitlines()
    if rc != 0:
        sys.stdout.write("\n".join(lines) + "\n")
        raise TestFailure("coll-train exited with %d" % rc)
    lrs = {int(m.group(1)) - 1: m.group(2) for m in map(LR_LINE.match, lines) if m}
    epochs = {int(m.group(1)): float(m.group(2)) for m in map(EPOCH_LINE.match, lines) if m}
    if sorted(lrs) != list(range(case["steps"])):
        raise TestFailure("lr lines for steps %s, expected 1..%d" % (sorted(lrs), case["steps"]))
    return lrs, epochs


def reference_lrs(args, case):
    steps = [str(t) for t in range(case["steps"])]
    rc, text = harness.run([args.lr_ref] + case["ref"] + ["--"] + steps, args.timeout,
                           echo=False, check=False)
    lines = text.splitlines()
    if rc != 0:
        raise TestFailure("lr_ref exited with %d: %s" % (rc, lines))
    return {int(t): lr for t, lr in (l.split() for l in lines)}


def check(args, name, case):
    lrs, epochs = trainer_lrs(args, case)
    ref = reference_lrs(args, case)
    wrong = [(t, lrs[t], ref[t]) for t in sorted(ref) if lrs[t] != ref[t]]
    if wrong:
        raise TestFailure("%s: %d steps differ from coll_schedule_lr, first (step, trainer, "
                          "reference): %s" % (name, len(wrong), wrong[:3]))
    for t, want in sorted(case["hand"].items()):
        got = float(lrs[t])
        if not abs(got - want) <= 1e-12 * max(abs(want), 1e-300):
            raise TestFailure("%s: step %d (0-based) has lr %r, by hand %r" % (name, t, got, want))
    for e, lr in sorted(epochs.items()):
        last = min(e * STEPS_PER_EPOCH, case["steps"]) - 1
        if not abs(lr - float(lrs[last])) <= 1e-5 * float(lrs[last]):
            raise TestFailure("%s: epoch %d prints lr=%g, its last step %d had %s"
                              % (name, e, lr, last + 1, lrs[last]))
    harness.log("%s: %d steps equal to coll_schedule_lr, %d hand values, %d epoch lines"
                % (name, len(ref), len(case["hand"]), len(epochs)))


def main():
    p = harness.launch_parser(__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="coll-train binary")
    p.add_argument("--lr-ref", required=True, help="lr_ref binary")
    args = p.parse_args()
    harness.dataset_or_skip()
    harness.main(lambda: (check(args, "linear scaling + warmup + step decay", GOYAL),
                          check(args, "warmup from 0 + cosine", COSINE)))


if __name__ == "__main__":
    main()
