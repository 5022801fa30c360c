"""Shared helpers of the integration test scripts (Python 3 standard library only).

A script gets the paths of the launcher, the daemon and the trainer from its command line (CMake
passes the build tree's), runs them with a bounded time, and reads the daemons' log lines that
the launcher forwards as "[d<node>] <time> collectived[<pid>] <level> <subsystem>: <text>".
"""

import argparse
import os
import re
import subprocess
import sys
import time

SKIP = 77  # ctest SKIP_RETURN_CODE of these tests

DAEMON_LINE = re.compile(r"^\[d(\d+)\] \S+ collectived\[\d+\] (\w+) (\w+): (.*)$")
UCX_PROBLEM = re.compile(r"UCX +(WARN|ERROR)")
FINAL_LINE = re.compile(r"^(?:\[r0\] )?final: (.*)$")


class TestFailure(Exception):
    """A failed check; main() prints it and exits 1."""


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--launcher", required=True, help="collective-launch")
    p.add_argument("--daemon", required=True, help="collectived binary")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="bound on each command in seconds (default 120)")
    return p


def log(msg):
    print("%s: %s" % (os.path.basename(sys.argv[0]), msg), flush=True)


def standalone_env():
    """The environment without any COLL_* variable, so a trainer runs without a daemon."""
    return {k: v for k, v in os.environ.items() if not k.startswith("COLL_")}


def run(cmd, timeout, env=None, echo=True):
    """Run @cmd with stdout and stderr merged; returns (exit code, output lines). A command that
    outlives @timeout is killed and fails the test."""
    log("running: %s" % " ".join(cmd))
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout,
                           env=env if env is not None else standalone_env())
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode(errors="replace")
        sys.stdout.write(out)
        raise TestFailure("%s did not finish within %.0f s" % (cmd[0], timeout))
    out = p.stdout.decode(errors="replace")
    if echo:
        sys.stdout.write(out)
        sys.stdout.flush()
    log("exit code %d after %.2f s" % (p.returncode, time.monotonic() - start))
    return p.returncode, out.splitlines()


def launch(args, nodes, ranks, cmd):
    """Run @cmd as every rank of a fresh local cluster; returns (exit code, output lines)."""
    return run([args.launcher, "--nodes", str(nodes), "--ranks-per-node", str(ranks),
                "--daemon", args.daemon, "--timeout", str(int(args.timeout)), "--"] + cmd,
               args.timeout + 30)


def daemon_lines(lines):
    """(node, level, subsystem, text) of every daemon log line."""
    out = []
    for line in lines:
        m = DAEMON_LINE.match(line)
        if m:
            out.append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
    return out


def check_no_warnings(lines, allowed=None):
    """Fail on any daemon line at warn or error level, or any UCX WARN/ERROR, unless
    @allowed(line) says it was expected."""
    bad = []
    for line in lines:
        m = DAEMON_LINE.match(line)
        problem = (m is not None and m.group(2) in ("warn", "error")) or UCX_PROBLEM.search(line)
        if problem and not (allowed is not None and allowed(line)):
            bad.append(line)
    if bad:
        raise TestFailure("unexpected warnings or errors:\n  " + "\n  ".join(bad))


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


def main(body):
    """Run @body(); a TestFailure becomes a FAIL line and exit code 1."""
    try:
        body()
    except TestFailure as e:
        log("FAIL: %s" % e)
        sys.exit(1)
    log("PASS")
