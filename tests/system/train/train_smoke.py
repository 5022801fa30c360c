#!/usr/bin/env python3
"""Main-job smoke test: coll-train for one epoch on 4 ranks over 2 daemons must finish, print a
'final:' line for 2 nodes, 4 ranks and 1 epoch, and reach the accuracy floor, with no daemon or
UCX warning on the way."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness  # noqa: E402
from harness import TestFailure  # noqa: E402


def smoke(args):
    rc, lines = harness.launch(args, 2, 2, [args.train, "--epochs", "1"])
    if rc != 0:
        raise TestFailure("collective-launch exited with %d" % rc)
    fields = harness.final_fields(lines)
    harness.expect_fields(fields, nodes=2, ranks=4, epochs=1)
    try:
        acc = float(fields["test_accuracy"])
        loss = float(fields["train_loss"])
    except (KeyError, ValueError):
        raise TestFailure("final line lacks a numeric test_accuracy or train_loss: %r" % fields)
    harness.log("test_accuracy %.4f (floor %.2f), train_loss %.4f" % (acc, args.min_accuracy,
                                                                     loss))
    if not acc >= args.min_accuracy:
        raise TestFailure("test accuracy %.4f < %.2f after one epoch" % (acc, args.min_accuracy))
    harness.check_no_warnings(lines)


def main():
    p = harness.launch_parser(__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="coll-train binary")
    p.add_argument("--min-accuracy", type=float, default=0.80)
    args = p.parse_args()
    harness.dataset_or_skip()
    harness.main(lambda: smoke(args))


if __name__ == "__main__":
    main()
