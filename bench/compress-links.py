#!/usr/bin/python3
"""compress-links: step time of every compression method on loopback and on shaped links
(results in docs/compression.md).

    bench/compress-links.py [-o DIR] [--links LINK[,LINK...]] [--methods "SPEC[;SPEC...]"]
                            [--steps S] [--skip K] [--hidden H] [--build DIR]

For each link (loopback: 2 daemons on 127.0.0.1, unshaped; 1gbit and 100mbit: 2 network
namespaces joined by veth pairs through a bridge, every link shaped on both ends with tc tbf,
bench/netns.sh, which creates only namespaces of its own prefix and deletes them however it
exits) and each method (none, fp16, onebit, powersgd:2, topk:0.01, auto), it runs S steps of
coll-train on 2 nodes x 1 rank with the model 784-1024x3-10 (2,913,290 parameters: 11.65 MB of
float32 gradients; --hidden changes it) and reports the median of rank 0's step times over the
steps after the first K (--report-steps lines; S = 30 and K = 10 by default: auto tries, in its
first few steps, the methods its calibration is optimistic about, and then settles). It also prints the bytes per step and node the daemon counted.

Outputs in DIR (default /tmp/coll-links-<date>): <link>-<method>.txt (each job's output),
results.json and table.md (step time per method and link, and the ratio to none). Needs root
and iproute2 for the shaped links. Exit status 1 when a run failed.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import benchlib as bl  # noqa: E402
LINKS = ["loopback", "1gbit", "100mbit"]
METHODS = ["none", "fp16", "onebit", "powersgd:2", "topk:0.01", "auto"]
STEP = re.compile(r"^\[r0\] step (\d+) step_ms=([0-9.]+)")
FIELD = re.compile(r"(\w+)=([0-9.e+-]+)")


def command(args, link, spec):
    """The command line of one job (under netns.sh for a shaped link)."""
    build = args.build
    train = [bl.built(build, "TRAIN"), "--steps", str(args.steps), "--epochs", "1",
             "--hidden", args.hidden, "--report-steps", "--compression", spec]
    launch = [bl.built(build, "LAUNCH"), "--nodes", "2", "--ranks-per-node", "1",
              "--daemon", bl.built(build, "DAEMON"), "--timeout", str(args.limit)]
    if link == "loopback":
        return launch + ["--"] + train
    # netns.sh gives the command NETNS_PREFIX and NETNS_ADDR_TEMPLATE: expand them there.
    inner = 'exec "$@" --netns-prefix "$NETNS_PREFIX" --netns-addr "$NETNS_ADDR_TEMPLATE" -- ' \
        + " ".join(train)
    return [HERE + "/netns.sh", "-n", "2", "-r", link, "-t", str(args.limit + 30), "--",
            "sh", "-c", inner, "sh"] + launch


def run_one(args, link, spec):
    out_path = "%s/%s-%s.txt" % (args.out, link, spec.replace(":", "-").replace(",", "-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLL_")}
    env["COLL_POOL_SIZE"] = "1G"
    start = time.monotonic()
    p = subprocess.run(command(args, link, spec), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=args.limit + 90)
    text = p.stdout.decode(errors="replace")
    with open(out_path, "w") as f:
        f.write(text)
    steps = [float(m.group(2)) for m in map(STEP.match, text.splitlines()) if m]
    epoch = [l for l in text.splitlines() if l.startswith("[r0] epoch ")]
    print("compress-links: %s %s: exit %d after %.0f s, %d steps" %
          (link, spec, p.returncode, time.monotonic() - start, len(steps)), file=sys.stderr,
          flush=True)
    if p.returncode != 0 or len(steps) <= args.skip or not epoch:
        raise RuntimeError("%s on %s failed (exit %d), see %s" % (spec, link, p.returncode,
                                                                  out_path))
    f = {k: float(v) for k, v in FIELD.findall(epoch[-1])}
    return {"step_ms": statistics.median(steps[args.skip:]), "steps_ms": steps,
            "wire_mb": f.get("wire_mb_per_step", f.get("dense_mb_per_step", 0.0)),
            "dense_mb": f.get("dense_mb_per_step", 0.0)}


def table(results, links, methods):
    rows = ["| method | " + " | ".join("%s ms (x none)" % l for l in links) +
            " | MB/step sent |", "| --- |" + " ---: |" * (len(links) + 1)]
    for spec in methods:
        cells = []
        for link in links:
            r, base = results.get(link, {}).get(spec), results.get(link, {}).get("none")
            if r is None:
                cells.append("")
            elif base is None:
                cells.append("%.0f" % r["step_ms"])
            else:
                cells.append("%.0f (%.2f)" % (r["step_ms"], r["step_ms"] / base["step_ms"]))
        mb = [results[l][spec]["wire_mb"] for l in links if spec in results.get(l, {})]
        rows.append("| %s | %s | %s |" % (spec, " | ".join(cells),
                                           "%.3f" % mb[-1] if mb else ""))
    return "\n".join(rows) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out", default="/tmp/coll-links-" + time.strftime("%Y%m%d-%H%M%S"))
    p.add_argument("--links", default=",".join(LINKS))
    p.add_argument("--methods", default=";".join(METHODS), help="specs separated by ;")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--skip", type=int, default=10)
    p.add_argument("--hidden", default="1024x3")
    p.add_argument("--limit", type=int, default=300, help="bound of one job in seconds")
    p.add_argument("--build", default=os.environ.get("BUILD_DIR", TOP + "/build"))
    args = p.parse_args()
    links, methods = args.links.split(","), args.methods.split(";")
    os.makedirs(args.out, exist_ok=True)
    results = {}
    try:
        for link in links:
            for spec in methods:
                results.setdefault(link, {})[spec] = run_one(args, link, spec)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print("compress-links: %s" % e, file=sys.stderr)
        return 1
    finally:
        with open(args.out + "/results.json", "w") as f:
            json.dump(results, f, indent=1)
        with open(args.out + "/table.md", "w") as f:
            f.write(table(results, links, methods))
    sys.stdout.write(table(results, links, methods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
