#!/usr/bin/env python3
"""coll-train's optimizers at their own default learning rates, on the demo's cluster (2 nodes
x 2 ranks, tools/run-demo.sh), and a diverging run stopped.

--check defaults: `coll-train --epochs 2 --optimizer X --service` with every other setting
default, for X in lamb, adamw, lars: the lr of the epoch lines is X's default (0.014, 0.001,
1.77: coll_ps_optim_default_lr()) and the final test accuracy is at least 0.84 (with SGD's
0.05, which all of them used before, LAMB ended at 0.14-0.17 with a loss of 57-67, AdamW at
0.80, LARS at 0.78).

--check diverge: LAMB with --service at SGD's lr 0.05 stops after its second epoch of three
(loss 1.9, then 82: above 2 ln 10, twice chance), exit status 3, with the message that the training
diverged; SGD at lr 1e4 (its loss not finite) stops the same way after its first, without
--service. Neither trains another epoch.
"""

import argparse
import os
import re
import subprocess
import sys

DEFAULT_LR = {"lamb": 0.014, "adamw": 0.001, "lars": 1.77}
ACCURACY = 0.84
WARNINGS = re.compile(r"collectived\[[0-9]+\] (warn|error) |UCX +(WARN|ERROR)")


def run(args, train_args, nodes=2, ranks=2):
    """(exit status, output) of coll-train on nodes x ranks under the launcher."""
    cmd = [args.launcher, "--nodes", str(nodes), "--ranks-per-node", str(ranks), "--daemon",
           args.daemon, "--timeout", "240", "--", args.train] + train_args
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLL")}
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       universal_newlines=True, timeout=300)
    return p.returncode, p.stdout


def check_defaults(args):
    failures = []
    for optimizer, lr in DEFAULT_LR.items():
        rc, out = run(args, ["--epochs", "2", "--optimizer", optimizer, "--service"])
        final = re.search(r"final: nodes=2 ranks=4 epochs=2 test_accuracy=([0-9.]+)", out)
        lrs = set(float(x) for x in re.findall(r"epoch \d/2 loss=\S+ lr=(\S+)", out))
        if rc != 0 or final is None or WARNINGS.search(out):
            failures.append("%s: exit %d, no final line or a warning:\n%s" % (optimizer, rc, out))
            continue
        accuracy = float(final.group(1))
        print("%s: lr %s, test accuracy %.4f" % (optimizer, sorted(lrs), accuracy))
        if lrs != {lr}:
            failures.append("%s: the epochs ran at lr %s, not the default %g" % (optimizer,
                                                                                 lrs, lr))
        if accuracy < ACCURACY:
            failures.append("%s: test accuracy %.4f < %.2f" % (optimizer, accuracy, ACCURACY))
    return failures


def check_diverge(args):
    failures = []
    for train_args, nodes, ranks, epoch, words in (
            (["--epochs", "3", "--optimizer", "lamb", "--service", "--lr", "0.05"], 2, 2, 2,
             "is above 4.605, twice the loss of predicting every class alike"),
            (["--epochs", "3", "--lr", "1e4"], 1, 2, 1, "is not finite")):
        rc, out = run(args, train_args, nodes, ranks)
        print(out[-600:])
        said = "the training diverged: epoch %d's loss" % epoch
        if rc != 3 or said not in out or words not in out:
            failures.append("%s: exit %d, expected 3 and '%s ... %s':\n%s"
                            % (" ".join(train_args), rc, said, words, out))
        if "epoch %d/3" % (epoch + 1) in out:
            failures.append("%s: trained on after diverging" % " ".join(train_args))
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launcher", required=True)
    p.add_argument("--daemon", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--check", choices=("defaults", "diverge"), required=True)
    args = p.parse_args()
    failures = (check_defaults if args.check == "defaults" else check_diverge)(args)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
