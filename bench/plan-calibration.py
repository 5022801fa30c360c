#!/usr/bin/env python3
"""Calibrate coll-plan against coll-train on this machine (docs/planner.md).

For the Fashion-MNIST MLP trained by 4 ranks on one node, every 4-rank layout (tp, pp, dp) is
run with coll-train's 3D trainer, and coll-plan's estimates are set beside the measurements:

  - memory: every rank's peak resident set (VmHWM, which counts the pool pages it touched)
    against coll-plan's total for that rank's stage (tools/plan/memory.py stage_memory);
  - step time: rank 0's mean step (first step left out) against coll-plan's step estimate, and
    the two rankings of the layouts (Kendall's tau).

coll-plan's inputs are measured, not fitted: --base-mem is the mean VmHWM of the same run with
a 784-8-10 network (the process, its libraries, the data set, the pool's control blocks);
--flops the FLOP rate of one coll-train process (6 FLOPs per weight and image) while four run
at once, as the ranks do, with --mfu 1; --intra-bw and --intra-latency from coll-perf
allreduces of 64 KiB and 4 MiB on the same 4 ranks (the ring's alpha-beta model solved for
both sizes). Timings on a shared machine vary: --repeat runs each layout several times and
keeps the median step; the runs go round robin over the layouts, so that a change of load
hits them all. Prints a markdown report (and --json writes the numbers).

usage: bench/plan-calibration.py --build build [--hidden 2048x3] [--steps 6] [--repeat 3]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib as bl  # noqa: E402


def import_planner(build):
    """coll-plan's package (plan/) from the build tree: the tool this script measures."""
    global Cluster, Layout, Training, stage_memory, MLP, param_count, estimate, factorizations
    sys.path.insert(0, os.path.dirname(bl.built(build, "PLAN")))
    from plan.config import Cluster, Layout, Training
    from plan.memory import stage_memory
    from plan.model import MLP, param_count
    from plan.planner import estimate, factorizations

BATCH, MICRO, RANKS = 256, 4, 4
MEMORY = re.compile(r"^\[r(\d+)\] memory: rank \d+ tp=(\d+) pp=(\d+) dp=(\d+) vmhwm_kb=(\d+)$")
EPOCH = re.compile(r"^\[r0\] epoch \S+ .*?step_ms=([\d.]+)")
COMPUTE = re.compile(r"compute_ms=([\d.]+)")
PERF = re.compile(r"^\[r0\]\s+(\d+)\s+\d+\s+float32\s+sum\s+-1\s+\d+\s+([\d.]+)")


def run(cmd, timeout=900):
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        sys.stderr.write(out)
        raise SystemExit("%s exited with %d" % (" ".join(cmd[:3]), p.returncode))
    return out.splitlines()


def launch(b, cmd):
    return run([bl.built(b, "LAUNCH"), "--nodes", "1", "--ranks-per-node", str(RANKS),
                "--daemon", bl.built(b, "DAEMON"), "--"] + cmd)


def train_layout(args, hidden, layout, steps):
    """{rank: (stage, kb)} and rank 0's mean step in seconds."""
    tp, pp, dp = layout
    lines = launch(args.build, [bl.built(args.build, "TRAIN"), "--hidden",
                                hidden, "--batch", str(BATCH), "--micro-batches", str(MICRO),
                                "--steps", str(steps), "--tp", str(tp), "--pp", str(pp),
                                "--dp", str(dp)])
    mem = {int(m.group(1)): (int(m.group(3)), int(m.group(5)) * 1024)
           for m in map(MEMORY.match, lines) if m}
    steps_ms = [float(m.group(1)) for m in map(EPOCH.match, lines) if m]
    if len(mem) != RANKS or not steps_ms:
        raise SystemExit("no memory or epoch lines for %s" % (layout,))
    return mem, steps_ms[-1] / 1e3


def compute_rate(args, params, steps):
    """FLOP/s of one coll-train process while RANKS of them run at once (the ranks' share of
    the machine): 6 x params x images / compute time per step."""
    train = bl.built(args.build, "TRAIN")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLL_")}
    procs = [subprocess.Popen([train, "--hidden", args.hidden, "--batch", str(BATCH // RANKS),
                               "--steps", str(steps)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env) for _ in range(RANKS)]
    rates = []
    for p in procs:
        out = p.communicate()[0].decode()
        ms = [float(m.group(1)) for m in map(COMPUTE.search, out.splitlines()) if m]
        rates.append(6.0 * params * (BATCH // RANKS) / (ms[-1] / 1e3))
    return statistics.median(rates)


def link(args):
    """(bandwidth B/s, latency s) of the ring model from allreduces of 64 KiB and 4 MiB:
    t = 2 (n-1)/n bytes/bw + 2 (n-1) alpha."""
    out = launch(args.build, [bl.built(args.build, "PERF"), "-b", "64K",
                              "-e", "4M", "-f", "64", "-n", "20", "-T", "2", "-c", "0"])
    t = {int(m.group(1)): float(m.group(2)) * 1e-6 for m in map(PERF.match, out) if m}
    (s1, t1), (s2, t2) = sorted(t.items())
    f = 2.0 * (RANKS - 1) / RANKS
    bw = f * (s2 - s1) / (t2 - t1)
    alpha = max((t1 - f * s1 / bw) / (2 * (RANKS - 1)), 1e-6)
    return bw, alpha


def kendall(a, b):
    """Kendall's tau of two rankings given as {key: value}."""
    keys = list(a)
    pairs = [(i, j) for i in range(len(keys)) for j in range(i + 1, len(keys))]
    score = sum(1 if (a[keys[i]] - a[keys[j]]) * (b[keys[i]] - b[keys[j]]) > 0 else -1
                for i, j in pairs)
    return score / len(pairs)


def measure(args):
    widths = tuple([784] + [int(w) for w in args.hidden.split("x")[:1]] *
                   int(args.hidden.split("x")[1]) + [10])
    model = MLP(widths=widths)
    base = statistics.mean(kb for _, kb in train_layout(args, "8", (1, 1, 4), 2)[0].values())
    flops = compute_rate(args, param_count(model), args.steps)
    bw, alpha = link(args)
    layouts = [tuple(lay) for lay in factorizations(RANKS)]
    results = {lay: [] for lay in layouts}
    for _ in range(args.repeat):            # round robin: a change of load hits every layout
        for lay in layouts:
            results[lay].append(train_layout(args, args.hidden, lay, args.steps))
    runs = {lay: {"memory": r[0][0], "step_s": statistics.median(x[1] for x in r),
                  "steps_s": [x[1] for x in r]} for lay, r in results.items()}
    return {"widths": widths, "base_mem": base, "flops": flops, "intra_bw": bw,
            "intra_latency": alpha, "runs": runs, "load": os.getloadavg()[1]}


def compare(m):
    model = MLP(widths=tuple(m["widths"]))
    train = Training(global_batch=BATCH, micro_batch=0, micro_batches=MICRO, precision="fp32",
                     optimizer="sgd")
    cluster = Cluster(nodes=1, gpus_per_node=RANKS, gpu_mem=1e12, intra_bw=m["intra_bw"],
                      intra_latency=m["intra_latency"], gpu_flops=m["flops"], mfu=1.0,
                      base_mem=m["base_mem"], bucket_bytes=25 * 2**20)
    rows, est, meas = [], {}, {}
    for lay, run in m["runs"].items():
        layout = Layout(*lay)
        r = estimate(model, train, cluster, layout)
        est[lay], meas[lay] = r["time"]["step"], run["step_s"]
        for rank, (stage, kb) in sorted(run["memory"].items()):
            want = stage_memory(model, train, cluster, layout, stage, r["micro_batch"], MICRO)
            rows.append((lay, rank, stage, want["total"], kb, want["total"] / kb - 1))
    return rows, est, meas, kendall(est, meas)


def report(m, rows, est, meas, tau):
    name = lambda lay: "tp%d pp%d dp%d" % lay  # noqa: E731
    print("MLP %s, global batch %d in %d micro-batches per replica, %d ranks on one node; "
          "inputs measured: base %.1f MB, %.2f GFLOP/s per rank, allreduce %.3f GB/s and "
          "%.0f us per step\n" % ("x".join(map(str, m["widths"])), BATCH, MICRO, RANKS,
                                  m["base_mem"] / 1e6, m["flops"] / 1e9, m["intra_bw"] / 1e9,
                                  m["intra_latency"] * 1e6))
    print("| layout | rank | stage | estimated | measured (VmHWM) | error |\n|---|---|---|---|---|---|")
    for lay, rank, stage, want, got, err in rows:
        print("| %s | %d | %d | %.1f MB | %.1f MB | %+.1f%% |" % (name(lay), rank, stage,
                                                              want / 1e6, got / 1e6, 100 * err))
    print("\nlargest memory error: %.1f%%\n" % (100 * max(abs(r[5]) for r in rows)))
    print("| layout | estimated step | rank | measured step (median) | rank | runs |\n"
          "|---|---|---|---|---|---|")
    er = {k: i + 1 for i, k in enumerate(sorted(est, key=est.get))}
    mr = {k: i + 1 for i, k in enumerate(sorted(meas, key=meas.get))}
    for lay in sorted(est, key=est.get):
        runs = ", ".join("%.0f" % (1e3 * x) for x in m["runs"][lay]["steps_s"])
        print("| %s | %.0f ms | %d | %.0f ms | %d | %s |" % (name(lay), 1e3 * est[lay], er[lay],
                                                           1e3 * meas[lay], mr[lay], runs))
    print("\nKendall's tau of the two rankings: %.2f (load average over the runs: %.1f on %d "
          "cores)" % (tau, m["load"], os.cpu_count()))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", required=True, help="the build tree")
    p.add_argument("--hidden", default="2048x3", help="WxN hidden layers (default 2048x3)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="write the measurements and estimates here")
    args = p.parse_args()
    import_planner(args.build)
    m = measure(args)
    rows, est, meas, tau = compare(m)
    report(m, rows, est, meas, tau)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"measured": {k: v for k, v in m.items() if k != "runs"},
                       "memory": [[list(r[0])] + list(r[1:]) for r in rows],
                       "steps": [[list(k), est[k], meas[k], m["runs"][k]["steps_s"]]
                                 for k in est], "tau": tau}, f,
                      indent=1)


if __name__ == "__main__":
    main()
