#!/usr/bin/python3
"""large-batch-report.py DIR: the tables and the plot of a bench/large-batch.sh results directory.

Reads DIR/<run>.txt (the output of each run: rank 0's lines, which start with "[r0] " through
collective-launch and with nothing in a run of one process) and writes
  DIR/table.md     one row per run: batch, optimizer, schedule, final and best test accuracy,
                   final train loss, mean step and epoch time, difference to the baseline;
  DIR/layers.md    per run and tensor, from the --report-layers lines: the trust ratio, the
                   update ratio ||dw|| / ||w||, ||w|| and ||g|| at a few early steps;
  DIR/accuracy.png test accuracy (and train loss) per epoch of every run (matplotlib);
and prints table.md. The baseline is the run named sgd-b256. Exit status 1 when a run has no
epoch lines.
"""

import math
import os
import re
import sys

RUNS = ["sgd-b256", "sgd-b8k", "sgd-b8k-linear", "sgd-b8k-linear-warmup", "lars-b8k",
        "lamb-b8k"]
BASELINE = "sgd-b256"
EPOCH = re.compile(r"^(?:\[r0\] )?epoch (\d+)/\d+ loss=(\S+) lr=(\S+) samples/s=\S+ "
                   r"epoch_s=(\S+) step_ms=(\S+) .* test_accuracy=(\S+)$")
LAYER = re.compile(r"^(?:\[r0\] )?layer step=(\d+) tensor=(\S+) w_norm=(\S+) g_norm=(\S+) "
                   r"trust=(\S+) update_norm=\S+ update_ratio=(\S+)$")
DESCRIBE = re.compile(r"^(?:\[r0\] )?coll-train: .*global batch (\d+) .*parameters, (.*)$")
LAYER_STEPS = (1, 7, 14)  # after one step, one epoch and two epochs at batch 8192


def parse(path):
    run = {"epochs": [], "layers": {}, "batch": None, "settings": ""}
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = EPOCH.match(line)
            if m:
                e, loss, lr, epoch_s, step_ms, acc = m.groups()
                run["epochs"].append({"epoch": int(e), "loss": float(loss), "lr": float(lr),
                                      "epoch_s": float(epoch_s), "step_ms": float(step_ms),
                                      "acc": float(acc)})
            m = LAYER.match(line)
            if m:
                step, tensor, w, g, trust, ratio = m.groups()
                run["layers"][(int(step), tensor)] = (float(w), float(g), float(trust),
                                                      float(ratio))
            m = DESCRIBE.match(line)
            if m:
                run["batch"], run["settings"] = int(m.group(1)), m.group(2)
    return run


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def row(name, run, base_final):
    ep = run["epochs"]
    final = ep[-1]
    best = max(ep, key=lambda e: e["acc"])
    # The first epoch holds the first step, which lays out the buckets: leave it out.
    timed = ep[1:] if len(ep) > 1 else ep
    diff = 100 * (final["acc"] - base_final)
    return ("| %s | %d | %s | %.2f | %.2f (%d) | %s | %.1f | %.1f | %+.2f |"
            % (name, run["batch"], run["settings"], 100 * final["acc"], 100 * best["acc"],
               best["epoch"], "%.4f" % final["loss"] if math.isfinite(final["loss"]) else "nan",
               mean([e["step_ms"] for e in timed]), mean([e["epoch_s"] for e in timed]), diff))


def table(runs):
    base_final = runs[BASELINE]["epochs"][-1]["acc"] if BASELINE in runs else float("nan")
    out = ["| run | batch | settings | final test acc % | best % (epoch) | final train loss | "
           "step ms | epoch s | final vs baseline (points) |",
           "|---|---|---|---|---|---|---|---|---|"]
    out += [row(name, runs[name], base_final) for name in RUNS if name in runs]
    return "\n".join(out) + "\n"


def layers(runs):
    out = []
    for name in RUNS:
        if name not in runs or not runs[name]["layers"]:
            continue
        tensors = sorted({t for _, t in runs[name]["layers"]},
                         key=lambda t: (int(t[2:t.index(".")]), t.endswith("bias")))
        steps = [s for s in LAYER_STEPS if any(k[0] == s for k in runs[name]["layers"])]
        out.append("### %s\n" % name)
        out.append("| tensor | " + " | ".join("step %d: trust, ‖dw‖/‖w‖, ‖w‖, ‖g‖" % s
                                               for s in steps) + " |")
        out.append("|---|" + "---|" * len(steps))
        for t in tensors:
            cells = []
            for s in steps:
                w, g, trust, ratio = runs[name]["layers"][(s, t)]
                # A zero tensor (a bias before its first update) has no update ratio.
                cells.append("%.3g, %s, %.3g, %.3g" % (trust, "%.3g" % ratio if w > 0 else "-",
                                                       w, g))
            out.append("| %s | %s |" % (t, " | ".join(cells)))
        out.append("")
    return "\n".join(out)


def diverged(run):
    """A run whose last epoch's loss is not finite or above 10 (chance is ln 10 = 2.3)."""
    loss = run["epochs"][-1]["loss"]
    return not math.isfinite(loss) or loss > 10


def plot(runs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base_final = runs[BASELINE]["epochs"][-1]["acc"] if BASELINE in runs else 0.0
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5))
    for name in RUNS:
        if name not in runs:
            continue
        ep = runs[name]["epochs"]
        xs = [e["epoch"] for e in ep]
        # Diverged runs are off both scales, which are kept on the runs that train: their
        # label says where they are.
        label = name + (" (diverged: %.1f %%)" % (100 * ep[-1]["acc"])
                        if diverged(runs[name]) else "")
        ax.plot(xs, [100 * e["acc"] for e in ep], marker=".", label=label)
        bx.plot(xs, [e["loss"] if math.isfinite(e["loss"]) else float("nan") for e in ep],
                marker=".", label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(max(0.0, 100 * base_final - 35), 100)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title("Fashion-MNIST: test accuracy after each epoch")
    losses = [e["loss"] for r in runs.values() if not diverged(r) for e in r["epochs"]]
    if losses:
        bx.set_ylim(min(losses) / 1.5, max(losses) * 1.5)
    bx.set_xlabel("epoch")
    bx.set_ylabel("train loss (mean over the epoch)")
    bx.set_yscale("log")
    bx.grid(True, alpha=0.3)
    bx.set_title("train loss")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: large-batch-report.py DIR")
    d = sys.argv[1]
    runs = {}
    for name in RUNS:
        path = os.path.join(d, name + ".txt")
        if os.path.exists(path):
            runs[name] = parse(path)
            if not runs[name]["epochs"]:
                sys.exit("%s: no epoch lines with a test accuracy" % path)
    if not runs:
        sys.exit("%s: no run outputs" % d)
    with open(os.path.join(d, "table.md"), "w") as f:
        f.write(table(runs))
    with open(os.path.join(d, "layers.md"), "w") as f:
        f.write(layers(runs))
    plot(runs, os.path.join(d, "accuracy.png"))
    sys.stdout.write(table(runs))


if __name__ == "__main__":
    main()
