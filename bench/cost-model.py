#!/usr/bin/env python3
"""cost-model: the cost model's constants, its check against the namespace cluster, and its
extrapolation to 1,024 nodes (docs/cost-model.md). The formulas are the daemon's own
(daemon/engine/cost.c), run through the built coll-cost.

    cost-model.py calibrate DIR RATE...        # bench/calibrate.sh's raw outputs -> params
    cost-model.py check DIR PARAMS_DIR         # bench/model-check.sh's runs against the model
    cost-model.py extrapolate PARAMS OUT_DIR [--ranks-per-node 8] [--nodes 1024]

calibrate writes DIR/params-<rate>.txt and prints the constants; check prints measured and
predicted times and every error above 15 %; extrapolate writes OUT_DIR/cost-1024.md (which
algorithm wins at each size on --nodes nodes, and the busbw each reaches) and, with matplotlib
(/usr/bin/python3), OUT_DIR/cost-1024.png. Exit status 1 when inputs are missing.
"""
import argparse
import glob
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib as bl  # noqa: E402

TOLERANCE = 0.15
PINGPONG_SIZES = (8, 65536, 1048576, 4194304)


# ---- calibrate ---------------------------------------------------------------------------

def ucx_p50_us(path):
    """The 50th percentile latency (us) of ucx_perftest's "Final:" line."""
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("Final:"):
                return float(line.split()[2])
    return None


def iperf_gbps(path):
    with open(path, errors="replace") as f:
        for line in f:
            if "receiver" in line:
                m = re.search(r"([\d.]+) Gbits/sec", line)
                if m:
                    return float(m.group(1))
    return None


def medians(paths, fn):
    vals = [v for v in (fn(p) for p in paths if os.path.exists(p)) if v is not None]
    return statistics.median(vals) if vals else None


def fit_line(points):
    """Least squares a + b x through @points [(x, y)]."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - b * mx, b


def parse_if(path):
    """The (size, row) pairs of a coll-lat output, none where the file is missing."""
    return bl.parse_lat(path).items() if os.path.exists(path) else []


def link_constants(rdir):
    """(constants, notes) of one rate from its rep directories."""
    reps = sorted(glob.glob(os.path.join(rdir, "rep*")))
    c, notes = {}, {}
    # The fastest repetition of each size: other work on the machine only ever slows a
    # ping-pong down (both ends poll), so the fastest is the closest to the link.
    pts = []
    for s in PINGPONG_SIZES:
        ts = [ucx_p50_us(os.path.join(r, "pingpong-%d.txt" % s)) for r in reps
              if os.path.exists(os.path.join(r, "pingpong-%d.txt" % s))]
        ts = [t for t in ts if t is not None]
        if ts:
            pts.append((s, min(ts) * 1e-6))
    if len(pts) >= 3 and pts[0][0] == 8:
        _, b = fit_line(pts[1:])  # the slope from 64 KiB up, where bytes dominate
        notes["pingpong"] = "ping-pong %s (the fastest of the repetitions): slope from 64 KiB " \
                            "%.3f Gbit/s" % (", ".join("%s %.1f us" % (bl.fmt_size(s), t * 1e6)
                                                        for s, t in pts),
                                             8e-9 / b if b > 0 else 0)
    # beta is the streaming rate: the algorithms keep the link busy with segments in flight,
    # while a ping-pong's large messages each start a TCP connection that went idle (slow
    # start again) through a token bucket that refilled meanwhile (docs/cost-model.md).
    gbps = medians([os.path.join(r, "iperf3.txt") for r in reps], iperf_gbps)
    if gbps:
        notes["iperf3"] = "%.2f Gbit/s" % gbps
        c["beta"] = 8 / (gbps * 1e9)
        notes["beta"] = "iperf3 between the two hosts, one stream, median: %.2f Gbit/s" % gbps
    lat = [bl.parse_lat(os.path.join(r, "coll-lat-2x1.txt")) for r in reps
           if os.path.exists(os.path.join(r, "coll-lat-2x1.txt"))]
    # The leaders' round: what a direct allreduce of 8-512 B costs on 2 x 1, its mean.
    direct = [r[5] for p in reps for s, r in parse_if(os.path.join(p, "coll-lat-direct-2x1.txt"))
              if s <= 512]
    if direct:
        c["alpha_direct"] = statistics.median(direct) * 1e-6
        notes["alpha_direct"] = "coll-lat 2x1 on the direct path, 8-512 B: the mean latency " \
                                "(one round between the leaders, with their wake-ups)"
    # The benchmarks time the mean of a batch (coll-perf), so the constants are means too:
    # the mean latency of a small allreduce between two daemons is alpha_op + alpha, split as
    # the phases' medians split it (arrive + notify: the hand-offs; peers + reduce: the round).
    small = [row for rows in lat for s, row in rows.items() if s <= 512 and row[4]]
    if small:
        mean = statistics.median(r[5] for r in small) * 1e-6
        share = statistics.median((r[4][0] + r[4][3]) / sum(r[4]) for r in small)
        c["alpha_op"], c["alpha"] = mean * share, mean * (1 - share)
        notes["alpha_op"] = "coll-lat -p 2x1, 8-512 B: the mean latency (%.1f us) times the " \
                            "share of arrive + notify in the phases (%.2f)" % (mean * 1e6, share)
        notes["alpha"] = "the rest of that mean: peers + reduce, recursive doubling's round"
    return c, notes


def cost_binary():
    """The built coll-cost of $BUILD_DIR (default <repo>/build-bench), as the scripts build it."""
    return bl.built(os.environ.get("BUILD_DIR", os.path.join(os.path.dirname(HERE),
                                                             "build-bench")), "COST")


# calibrate.sh's CPU runs on 2 x 1: name -> (collective, bytes per rank, the model's algorithm).
CPU_RUNS = {
    "cpu-rd8": ("allreduce", 8, "rd"), "cpu-ring8": ("allreduce", 8, "ring"),
    "cpu-ring16m": ("allreduce", 16 << 20, "ring"),
    "cpu-fp16": ("allreduce", 16 << 20, "fp16"), "cpu-onebit": ("allreduce", 16 << 20, "onebit"),
    "cpu-topk": ("allreduce", 16 << 20, "topk"),
}


def cpu_per_op(rdirs, name):
    """The CPU seconds per operation of calibrate.sh's NAME runs (the difference of the run of
    many operations and the run of few, over the operations between them), the median over the
    repetitions in @rdirs; None where a run is missing."""
    vals = []
    for rep in sorted(r for d in rdirs for r in glob.glob(os.path.join(d, "rep*"))):
        runs = {}
        for path in glob.glob(os.path.join(rep, "%s-*.txt" % name)):
            with open(path, errors="replace") as f:
                m = re.search(r"^# cpu_seconds ([\d.]+)$", f.read(), re.M)
            if m:
                runs[int(re.search(r"-(\d+)\.txt$", path).group(1))] = float(m.group(1))
        if len(runs) == 2:
            few, many = sorted(runs)
            vals.append((runs[many] - runs[few]) / (many - few))
    return statistics.median(vals) if vals else None


def node_work(cost, name, consts):
    """The model's CPU seconds of one node in run NAME (coll-cost's cpu_work_s) with @consts."""
    kind, size, algo = CPU_RUNS[name]
    sets = ["%s=%.9g" % kv for kv in sorted(consts.items())]
    return predict(cost, "", kind, 2, 1, size, sets)[algo][3]


def coefficient(cost, name, consts, key):
    """How much a node's work in NAME grows per unit of constant @key (the model is linear)."""
    return node_work(cost, name, dict(consts, **{key: 1.0})) - \
        node_work(cost, name, dict(consts, **{key: 0.0}))


def cpu_constants(resdir, rates, rate, host):
    """The CPU constants from calibrate.sh's CPU runs on 2 daemons x 1 rank, through the model
    itself (cost.h: a node's work W is linear in each constant, so each unknown is the measured
    work per node less the model's work without it, over the model's coefficient of it):
    cpu_msg and cpu_op from the 8 B allreduces by recursive doubling (a hand-off and a message
    a node) and the ring (a hand-off and two messages), cpu_byte from the ring at 16 MiB, and
    codec_cast, codec_onebit and codec_topk from the compressed allreduces at 16 MiB: each
    codec's CPU per element of a whole operation (the sums with the residual, the scans, the
    copies), in place of compress-bw's kernels alone. The 8 B runs' CPU varies from run to run
    (whether a rank and its daemon share a CPU), and does not depend on the link: their medians
    pool the repetitions of every rate; the 16 MiB runs are @rate's."""
    cost = cost_binary()
    meas = {n: cpu_per_op([os.path.join(resdir, r) for r in (rates if n.endswith("8") else
                                                              [rate])], n) for n in CPU_RUNS}
    if any(v is None for v in meas.values()) or "gamma" not in host:
        return {}, {}
    node = {n: v / 2 for n, v in meas.items()}
    zero = {"gamma": host["gamma"], "beta_mem": host.get("beta_mem", 0.0), "cpu_msg": 0.0,
            "cpu_op": 0.0, "cpu_byte": 0.0, "codec_cast": 0.0, "codec_onebit": 0.0,
            "codec_topk": 0.0}
    # Two equations in cpu_op and cpu_msg (8 B: the bytes' share is below the noise).
    a = [[coefficient(cost, n, zero, k) for k in ("cpu_op", "cpu_msg")]
         for n in ("cpu-rd8", "cpu-ring8")]
    b = [node[n] - node_work(cost, n, zero) for n in ("cpu-rd8", "cpu-ring8")]
    det = a[0][0] * a[1][1] - a[0][1] * a[1][0]
    c = dict(zero)
    c["cpu_op"] = max((b[0] * a[1][1] - a[0][1] * b[1]) / det, 0.0)
    c["cpu_msg"] = max((a[0][0] * b[1] - b[0] * a[1][0]) / det, 0.0)
    for key, name in (("cpu_byte", "cpu-ring16m"), ("codec_cast", "cpu-fp16"),
                      ("codec_onebit", "cpu-onebit"), ("codec_topk", "cpu-topk")):
        c[key] = max((node[name] - node_work(cost, name, dict(c, **{key: 0.0}))) /
                     coefficient(cost, name, c, key), 0.0)
    out = {k: c[k] for k in ("cpu_msg", "cpu_op", "cpu_byte", "codec_cast", "codec_onebit",
                             "codec_topk")}
    out["cpus"], out["cpus_shared"] = os.cpu_count(), 1
    us = ", ".join("%s %.1f us" % (n[4:], v * 1e6) for n, v in meas.items())
    notes = {k: "CPU per operation on 2 x 1 (%s), solved through the model" % us
             for k in ("cpu_msg", "cpu_op", "cpu_byte")}
    for k in ("codec_cast", "codec_onebit", "codec_topk"):
        notes[k] = "CPU per element of a whole compressed allreduce of 16 MiB on 2 x 1, less " \
                   "its messages and sums (the kernels alone: %.3g s, compress-bw)" % \
                   host.get(k, float("nan"))
    notes["cpus"] = "this machine's CPUs (os.cpu_count())"
    notes["cpus_shared"] = "every host of the cluster runs on them"
    return out, notes


def table_rows(path, isa_col):
    """The rows of a reduce-bw or compress-bw table, split on '|', and the default isa."""
    rows, isa = [], None
    with open(path, errors="replace") as f:
        for line in f:
            m = re.search(r"(?:default )?isa (\w+)", line)
            if isa is None and m:
                isa = m.group(1)
            if line.startswith("|") and not line.startswith("|-"):
                rows.append([x.strip() for x in line.strip().strip("|").split("|")])
    return [r for r in rows if len(r) > isa_col], isa


def host_constants(hdir):
    c, notes = {}, {}
    rows = bl.parse_lat(os.path.join(hdir, "coll-lat-1x2.txt")) \
        if os.path.exists(os.path.join(hdir, "coll-lat-1x2.txt")) else {}
    small = [r[5] for s, r in rows.items() if 16 <= s <= 512]
    if small:
        c["alpha_shm"] = statistics.median(small) * 1e-6
        notes["alpha_shm"] = "coll-lat 1x2 (pinned) mean latency at 16-512 B (shared memory)"
    path = os.path.join(hdir, "reduce-bw.txt")
    if os.path.exists(path):
        rows, isa = table_rows(path, 4)
        for r in rows:
            if r[0] == "memcpy" and r[3] in ("64", "64M"):
                payload = float(re.search(r"payload ([\d.]+)", r[-1]).group(1))
                c["beta_mem"] = 1 / (payload * 1e9)
                notes["beta_mem"] = "memcpy payload %.2f GB/s at 64 MiB" % payload
            if r[0] == isa and r[1] == "float32" and r[2] == "2" and r[3] in ("64", "64M"):
                c["gamma"] = 3 / (float(r[4]) * 1e9)
                notes["gamma"] = "reduce-bw %s float32 2 sources, 64 MiB: %s GB/s moved" % (
                    isa, r[4])
    path = os.path.join(hdir, "compress-bw.txt")
    if os.path.exists(path):
        rows, isa = table_rows(path, 3)
        rate = {r[0]: float(r[3]) for r in rows if r[1] == isa and len(r) > 4}
        step = [r for r in rows if r[0].startswith("ours") and "whole step" in r[0] and
                r[1] == "1024 x 1024" and r[2] == isa]

        def per_elem(*names):
            return sum(4 / (rate[n] * 1e9) for n in names)
        if "fp16 encode + EF" in rate:
            c["codec_cast"] = per_elem("fp16 encode + EF", "fp16 accumulate")
            c["codec_onebit"] = per_elem("1-bit encode + EF", "1-bit accumulate")
            c["codec_topk"] = per_elem("topk 1% auto + EF")
            notes["codec_*"] = "compress-bw %s at 16 MiB, per element" % isa
        if step:
            c["codec_flop"] = float(step[0][4]) * 1e-3 / (6 * 2 * 1024 * 1024)
            notes["codec_flop"] = "PowerSGD whole step, rank 2, 1024 x 1024: %s ms" % step[0][4]
    return c, notes


def calibrate(resdir, rates):
    hc, hn = host_constants(os.path.join(resdir, "host"))
    out = ["Constants of the cost model measured on this machine (bench/calibrate.sh); "
           "seconds, seconds per byte.", ""]
    head = ["constant"] + list(rates) + ["from"]
    rows, missing = {}, False
    for rate in rates:
        lc, ln = link_constants(os.path.join(resdir, rate))
        cc, cn = cpu_constants(resdir, rates, rate, hc)
        c = dict(hc, **lc)
        c.update(cc)
        notes = dict(hn, **ln)
        notes.update(cn)
        if len(c) < 9:
            missing = True
        with open(os.path.join(resdir, "params-%s.txt" % rate), "w") as f:
            f.write("# cost model constants, links of %s (bench/calibrate.sh)\n" % rate)
            for k, v in sorted(c.items()):
                f.write("%s = %.6g  # %s\n" % (k, v, notes.get(k, notes.get("codec_*", ""))))
            if "pingpong" in notes:
                f.write("# %s\n" % notes["pingpong"])
        for k, v in c.items():
            rows.setdefault(k, {})[rate] = (v, notes.get(k, notes.get("codec_*", "")))
        if "pingpong" in notes:
            rows.setdefault("(ping-pong)", {})[rate] = (notes["pingpong"].split(": ")[-1], "")
    cells = []
    for k in sorted(rows):
        vals = [rows[k].get(r, ("-", ""))[0] for r in rates]
        cells.append([k] + ["%.4g" % v if isinstance(v, float) else v for v in vals] +
                     [next((n for _, n in rows[k].values() if n), "")])
    print("\n".join(out) + bl.table(head, cells))
    return 1 if missing else 0


# ---- the model through coll-cost -----------------------------------------------------------

def predict(cost, params, kind, nodes, l, size, sets=()):
    """{algo: (seconds, busbw, best, cpu work of a node)} of coll-cost for one shape; @sets:
    KEY=VALUE overrides."""
    cmd = [cost, "--collective", kind, "-N", str(nodes), "-L", str(l), "-b", str(size),
           "-e", str(size)]
    for kv in sets:
        cmd += ["--set", kv]
    if params:
        cmd[1:1] = ["--params", params]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    res = {}
    for line in out.splitlines()[1:]:
        f = line.split(",")
        res[f[4]] = (float(f[5]), float(f[6]), f[7] == "1", float(f[9]))
    return res


CHECKED = {  # file name -> (collective, ranks per node, model algorithm)
    "ring": ("allreduce", 1, "ring"), "rd": ("allreduce", 1, "rd"),
    "chain": ("broadcast", 1, "chain"), "node_rd": ("allreduce", 2, "node_rd"),
    "direct": ("allreduce", 2, "direct"),
    "fp16": ("allreduce", 1, "fp16"), "onebit": ("allreduce", 1, "onebit"),
    "topk": ("allreduce", 1, "topk"),
}


def measured(resdir):
    """{(rate, nodes, name, size): [us of each repetition]} and the problems."""
    got, problems = {}, []
    for path in sorted(glob.glob(os.path.join(resdir, "*", "N*", "rep*", "*.txt"))):
        rel = os.path.relpath(path, resdir).split(os.sep)
        m = re.fullmatch(r"(\w+)-(\d+[KMG]?)\.txt", rel[3])
        if not m or m.group(1) not in CHECKED:
            continue
        rows, complete = bl.parse_perf(path, "in")
        if not complete or not rows:
            problems.append("%s: incomplete (see .err)" % "/".join(rel))
            continue
        for size, r in rows.items():
            got.setdefault((rel[0], int(rel[1][1:]), m.group(1), size), []).append(r[0])
    return got, problems


def check(resdir, params_dir):
    cost = cost_binary()
    got, problems = measured(resdir)
    rows, misses = [], 0
    for (rate, n, name, size), ts in sorted(got.items()):
        kind, l, algo = CHECKED[name]
        # model-check.sh runs recursive doubling above 128 KiB with 2 MiB segments.
        sets = ("segment_bytes=2097152", "rd_max_bytes=2097024") \
            if name == "rd" and size > 131072 else ()
        p = predict(cost, os.path.join(params_dir, "params-%s.txt" % rate), kind, n, l, size,
                    sets)
        if algo not in p:
            continue
        meas, pred = statistics.median(ts), p[algo][0] * 1e6
        err = (meas - pred) / pred
        miss = abs(err) > TOLERANCE
        misses += miss
        rows.append([rate, n, name, bl.fmt_size(size), "%d" % len(ts), bl.fmt_us(meas),
                     bl.fmt_us(pred), "%+.0f %%" % (100 * err), "MISS" if miss else "ok"])
    print("Measured (coll-perf in place, mean over ranks, median of the repetitions) against "
          "predicted (coll-cost with the rate's constants); a miss is an error above %d %%.\n"
          % (100 * TOLERANCE))
    sys.stdout.write(bl.table(["link", "nodes", "algorithm", "size", "runs", "measured us",
                               "predicted us", "error", ""], rows))
    print("\n%d of %d within %d %%." % (len(rows) - misses, len(rows), 100 * TOLERANCE))
    for p in problems:
        print("PROBLEM: " + p)
    return 1 if problems else 0


# ---- extrapolate ---------------------------------------------------------------------------

def sweep(cost, params, nodes, l, minb, maxb):
    """[(nodes, bytes, algo, seconds, busbw, best, lossy)] of coll-cost over a grid."""
    # No CPU bound: a real node has CPUs to spare, not the namespace cluster's shared two.
    cmd = [cost, "--collective", "allreduce", "-N", ",".join(map(str, nodes)), "-L", str(l),
           "-b", str(minb), "-e", str(maxb), "-f", "4", "--set", "cpus=0"]
    if params:
        cmd[1:1] = ["--params", params]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    res = []
    for line in out.splitlines()[1:]:
        f = line.split(",")
        res.append((int(f[1]), int(f[3]), f[4], float(f[5]), float(f[6]), f[7] == "1",
                    f[8] == "1"))
    return res


def extrapolate(args):
    cost = bl.built(args.build, "COST")
    n, l = args.nodes, args.ranks_per_node
    grid = sweep(cost, args.params, [n], l, 8, 1 << 30)
    algos = sorted({r[2] for r in grid}, key=lambda a: [x[3] for x in grid if x[2] == a][0])
    exact = [a for a in algos if not any(r[6] for r in grid if r[2] == a)]
    lossy = [a for a in algos if a not in exact]
    os.makedirs(args.out, exist_ok=True)
    head = ["size", "best exact", "its time", "its busbw"] + \
        ["%s busbw" % a for a in exact + lossy]
    rows = []
    for size in sorted({r[1] for r in grid}):
        at = {r[2]: r for r in grid if r[1] == size}
        best = next(r for r in at.values() if r[5])
        rows.append([bl.fmt_size(size), best[2], fmt_s(best[3]), "%.3g" % best[4]] +
                    ["%.3g" % at[a][4] if a in at else "-" for a in exact + lossy])
    text = ("Allreduce of float32 on %d nodes x %d ranks (%d ranks), predicted by the cost "
            "model (coll-cost%s); busbw in GB/s (nccl-tests: size / time x 2(n-1)/n); the "
            "compressed allreduces (%s) are lossy and never named best.\n\n" %
            (n, l, n * l, " --params " + os.path.basename(args.params) if args.params else "",
             ", ".join(lossy)) + bl.table(head, rows))
    text += ("\nThe fastest exact algorithm by node count (rows) and size (columns), %d ranks "
             "per node:\n\n" % l + winners(cost, args.params, l, None))
    text += ("\nThe same among the algorithms the daemons run today (%s):\n\n" %
             ", ".join(TODAY) + winners(cost, args.params, l, TODAY))
    with open(os.path.join(args.out, "cost-%d.md" % n), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    plot(grid, exact, lossy, args, os.path.join(args.out, "cost-%d.png" % n))
    return 0


def fmt_s(s):
    return "%.1f us" % (s * 1e6) if s < 1e-3 else "%.2f ms" % (s * 1e3) if s < 1 else \
        "%.2f s" % s


TODAY = ("ring", "rd", "node_rd", "node_ring")


def winners(cost, params, l, among):
    """A table of the fastest exact algorithm per node count and size (@among: only those)."""
    nodes = [2 ** k for k in range(1, 11)]
    grid = sweep(cost, params, nodes, l, 8, 1 << 30)
    sizes = sorted({r[1] for r in grid})
    best = {}
    for r in grid:
        if r[6] or (among and r[2] not in among):
            continue
        key = (r[0], r[1])
        if key not in best or r[3] < best[key][1]:
            best[key] = (r[2], r[3])
    best = {k: v[0] for k, v in best.items()}
    return bl.table(["nodes"] + [bl.fmt_size(s) for s in sizes],
                    [[str(n)] + [best.get((n, s), "-") for s in sizes] for n in nodes])


def plot(grid, exact, lossy, args, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("cost-model: no matplotlib here (run with /usr/bin/python3): no plot\n")
        return
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for a in exact + lossy:
        pts = sorted((r[1], r[4]) for r in grid if r[2] == a)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=a,
                linestyle="--" if a in lossy else "-", marker="." if a in exact else None)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("allreduce size per rank (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title("Cost model: allreduce on %d nodes x %d ranks (%s)" % (
        args.nodes, args.ranks_per_node, os.path.basename(args.params or "defaults")))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    sys.stderr.write("cost-model: wrote %s\n" % path)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("calibrate")
    c.add_argument("dir")
    c.add_argument("rates", nargs="+")
    k = sub.add_parser("check")
    k.add_argument("dir")
    k.add_argument("params_dir")
    e = sub.add_parser("extrapolate")
    e.add_argument("params", help="a params-<rate>.txt ('' for coll-cost's defaults)")
    e.add_argument("out")
    e.add_argument("--nodes", type=int, default=1024)
    e.add_argument("--ranks-per-node", type=int, default=8)
    e.add_argument("--build", default=os.environ.get(
        "BUILD_DIR", os.path.join(os.path.dirname(HERE), "build-bench")))
    args = p.parse_args(argv)
    if args.cmd == "calibrate":
        return calibrate(args.dir, args.rates)
    if args.cmd == "check":
        return check(args.dir, args.params_dir)
    return extrapolate(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
