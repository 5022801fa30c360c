"""Jobs run by collective-launch: the launcher, the daemon and the trainer come from the script's
command line (CMake passes the build tree's), and the daemons' log lines come back forwarded by
the launcher as "[d<node>] <time> collectived[<pid>] <level> <subsystem>: <text>"."""

import os
import re
import sys

from .basics import SKIP, TestFailure, launch_env, log, run

DAEMON_LINE = re.compile(r"^\[d(\d+)\] \S+ collectived\[\d+\] (\w+) (\w+): (.*)$")
FINAL_LINE = re.compile(r"^(?:\[r0\] )?final: (.*)$")


def launch(args, nodes, ranks, cmd):
    """Run @cmd as every rank of a fresh local cluster of args.launcher (args.daemon,
    args.timeout); returns (exit code, output lines)."""
    rc, out = run([args.launcher, "--nodes", str(nodes), "--ranks-per-node", str(ranks),
                   "--daemon", args.daemon, "--timeout", str(int(args.timeout)), "--"] + cmd,
                  args.timeout + 30, env=launch_env(), check=False)
    return rc, out.splitlines()


def daemon_lines(lines):
    """(node, level, subsystem, text) of every daemon log line."""
    out = []
    for line in lines:
        m = DAEMON_LINE.match(line)
        if m:
            out.append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
    return out


def final_fields(lines):
    """The key=value fields of rank 0's 'final:' line of coll-train, as strings."""
    finals = [FINAL_LINE.match(l).group(1) for l in lines if FINAL_LINE.match(l)]
    if len(finals) != 1:
        raise TestFailure("expected one 'final:' line from rank 0, found %d" % len(finals))
    fields = {}
    for tok in finals[0].split():
        key, sep, val = tok.partition("=")
        if not sep:
            raise TestFailure("cannot parse the final line: %r" % finals[0])
        fields[key] = val
    return fields


def expect_fields(fields, **want):
    """Fail unless every @want key=value is in @fields (final_fields())."""
    for key, val in want.items():
        if fields.get(key) != str(val):
            raise TestFailure("final line: %s=%s, expected %s" % (key, fields.get(key), val))


def dataset_or_skip(data_dir="/usr/share/datasets/fashion-mnist"):
    """Exit with SKIP (saying why) when the Fashion-MNIST files are not installed."""
    need = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
            "t10k-labels-idx1-ubyte"]
    missing = [n for n in need if not (os.path.exists(os.path.join(data_dir, n)) or
                                       os.path.exists(os.path.join(data_dir, n + ".gz")))]
    if missing:
        log("SKIP: Fashion-MNIST not found in %s (missing %s; install Debian's "
            "dataset-fashion-mnist)" % (data_dir, ", ".join(missing)))
        sys.exit(SKIP)
