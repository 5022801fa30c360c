#!/usr/bin/env python3
"""A gloo script runs unchanged on collectived: run it under collective-launch twice, with
"--backend gloo" and "--backend collectived" (nothing else differs), and compare what its
rank 0 wrote.

The script (by default gloo_style_train.py, next to this file) gets --backend and --out
appended. Compared: the world size and sample counts exactly; per epoch the summed loss and
the largest per-rank loss, and at the end every parameter, within --tolerance relative to the
largest magnitude of each (the two backends add floating-point gradients in other orders);
the correct-prediction counts exactly. The script never imports collectived's package: in
the collectived run the backend is there because collective-torch.pth (in the test's site
directory) registers it when torch.distributed is imported.

Exit status: 0 the runs agree, 1 they differ or one failed, 77 skip (torch or the backend
missing).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import common  # noqa: E402
import torch_common  # noqa: E402

torch_common.require_backend()


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launch", required=True, help="collective-launch")
    p.add_argument("--daemon", required=True, help="collectived")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--ranks", type=int, default=2, help="ranks per node")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--script", default=os.path.join(here, "gloo_style_train.py"))
    return p.parse_args()


def run(args, backend, out):
    cmd = [args.launch, "--nodes", str(args.nodes), "--ranks-per-node", str(args.ranks),
           "--daemon", args.daemon, "--timeout", "240", "--",
           args.python, args.script, "--backend", backend, "--out", out]
    common.log("running: %s" % " ".join(cmd))
    st = subprocess.call(cmd)
    if st != 0:
        common.log("FAIL: the %s run exited with %d" % (backend, st))
        return None
    with open(out) as f:
        return json.load(f)


def close(a, b, tol):
    scale = max(abs(v) for v in b) or 1.0
    return max(abs(x - y) for x, y in zip(a, b)) <= tol * scale


def compare(g, c, tol):
    """The differences between the gloo results @g and the collectived results @c."""
    bad = []
    if g["world"] != c["world"] or len(g["epochs"]) != len(c["epochs"]):
        bad.append("shape: %d ranks, %d epochs vs %d, %d" % (
            g["world"], len(g["epochs"]), c["world"], len(c["epochs"])))
        return bad
    for k, (eg, ec) in enumerate(zip(g["epochs"], c["epochs"])):
        for key in ("samples", "correct"):
            if eg[key] != ec[key]:
                bad.append("epoch %d %s: %d vs %d" % (k, key, eg[key], ec[key]))
        for key in ("loss_sum", "worst_loss"):
            if not close([ec[key]], [eg[key]], tol):
                bad.append("epoch %d %s: %.9g vs %.9g" % (k, key, eg[key], ec[key]))
    if len(g["params"]) != len(c["params"]) or not close(c["params"], g["params"], tol):
        bad.append("final parameters differ by more than %g (relative)" % tol)
    return bad


def main():
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="gloo-switch-") as tmp:
        results = {b: run(args, b, os.path.join(tmp, b + ".json"))
                   for b in ("gloo", "collectived")}
    if None in results.values():
        return 1
    bad = compare(results["gloo"], results["collectived"], args.tolerance)
    for line in bad:
        common.log("FAIL: " + line)
    if not bad:
        e = results["collectived"]["epochs"][-1]
        common.log("ok: gloo and collectived agree (last epoch: loss %.6f, %d/%d correct, "
                   "%d parameters)" % (e["loss_sum"] / e["samples"], e["correct"],
                                       e["samples"], len(results["gloo"]["params"])))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
