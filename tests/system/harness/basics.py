"""What every system test script needs: failures and skips, bounded waits and commands, the
environment a test hands its processes, the check for unexpected warnings, and main()."""

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77  # ctest SKIP_RETURN_CODE of every system test
T0 = time.monotonic()

# The sanitizers of this build (-DCOLL_SANITIZE; tests/sanitizer-env.cmake exports it to every
# test, "" in a normal build). Instrumented daemons and ranks run several times slower (ASan:
# 2-3x, more on a loaded machine), which delays each wake-up, submission and report by tens of
# milliseconds (ThreadSanitizer: 5-15x, more): a detection time checked against a bound gets
# SANITIZER_SLACK_S more there. The bounds themselves are what the normal build checks.
SANITIZE = os.environ.get("COLL_SANITIZE", "")
SANITIZER_SLACK_S = 1.0 if "thread" in SANITIZE else 0.5 if SANITIZE else 0.0



def _cpu_has(flag):
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and flag in line.split() for line in f)
    except OSError:
        return False


# OpenBLAS picks its sgemm kernels by the CPU at run time. Its AVX-512 ones (SkylakeX and later)
# round differently for matrices of different shapes, and the trainers' equivalence tests
# compare runs whose shapes differ (a tensor-parallel slice against the whole width, micro-
# batches of 32 rows against 64): their 4-layer network amplifies those last bits to 1e-2 in
# 30 steps (measured on an AVX-512 Xeon: 0.034 with the SkylakeX kernels, 3.3e-7 with Haswell's
# for 8 micro-batches against 4). The Haswell (AVX2) kernels agree across shapes, so every
# process the tests start uses them, where the CPU has AVX2 and nobody chose otherwise.
if _cpu_has("avx2"):
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

# A daemon's log line at warn or error level ("<time> collectived[<pid>] <level> <subsystem>:
# ...", with collective-launch's "[d<node>] " in front when it forwarded it), or UCX's own.
WARNING_LINE = re.compile(r"collectived\[\d+\] (warn|error) |UCX +(WARN|ERROR)")


class TestFailure(Exception):
    """A failed check; main() prints it and exits 1."""


class Skip(Exception):
    """The test cannot run here; main() says why and exits SKIP."""


def log(msg):
    print("[%7.2f] %s" % (time.monotonic() - T0, msg), flush=True)


def check(cond, msg):
    """Fail the test with @msg unless @cond holds."""
    if not cond:
        raise TestFailure(msg)


def wait_until(fn, timeout, what, period=0.05):
    """Poll fn() until it returns a true value (returned) or @timeout seconds pass (failure)."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() >= end:
            raise TestFailure("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(period)


def clean_env():
    """The environment without the COLL_* and COLLD_* variables of whoever runs the tests: they
    must not change what is tested."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("COLL_") and not k.startswith("COLLD_")}


def launch_env():
    """The environment of collective-launch: without COLL_* (the launcher sets a rank's), with
    COLLD_* (what the sanitizer passes set for every daemon, e.g. COLLD_LOOP_STALL_MS)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("COLL_")}


def run(cmd, timeout=60, env=None, check=True, echo=True, cwd=None):
    """(exit code, output) of @cmd, stdout and stderr merged, in @env (default clean_env()). A
    command that outlives @timeout seconds fails the test, and so does a non-zero exit code when
    @check."""
    log("running: %s" % " ".join(cmd))
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout,
                           env=env if env is not None else clean_env(), cwd=cwd)
    except subprocess.TimeoutExpired as e:
        sys.stdout.write((e.output or b"").decode(errors="replace"))
        raise TestFailure("%s did not finish within %.0f s" % (cmd[0], timeout))
    out = p.stdout.decode(errors="replace")
    if echo and out:
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
        sys.stdout.flush()
    log("exit code %d after %.2f s" % (p.returncode, time.monotonic() - start))
    if check and p.returncode != 0:
        raise TestFailure("%s exited with %d" % (" ".join(cmd), p.returncode))
    return p.returncode, out


# The loop watch's stall of the whole process (daemon/base/loopwatch.c): the host did not run
# the daemon at all (its monitor thread was held too), which says nothing about the daemon.
HOST_HELD = "the whole process was held (not scheduled"


def check_no_warnings(text, what="the output", allowed=()):
    """Fail on any daemon line at warn or error level and any UCX WARN or ERROR in @text (a
    string or a list of lines), unless it contains one of @allowed (strings, or compiled
    regular expressions that search it) or is a stall of the whole process (HOST_HELD: a loaded
    host, not the daemon)."""
    lines = text.splitlines() if isinstance(text, str) else text
    allowed = tuple(allowed) + (HOST_HELD,)

    def expected(line):
        return any(a.search(line) if hasattr(a, "search") else a in line for a in allowed)
    bad = [l for l in lines if WARNING_LINE.search(l) and not expected(l)]
    if bad:
        raise TestFailure("unexpected warnings or errors in %s:\n  %s" % (what, "\n  ".join(bad)))


def write_secret(path, data):
    """A node secret file (mode 0600, as the daemon requires)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def node_secret(path):
    """The node secret at @path, made (random) unless it is there: daemons that share it
    authenticate each other."""
    if not os.path.exists(path):
        write_secret(path, secrets.token_hex(32).encode() + b"\n")
    return path


def _on_signal(signum, frame):
    raise TestFailure("received signal %d" % signum)


def main(body, parser=None, cluster=None):
    """Run a test and exit 0 (PASS), 1 (a TestFailure: FAIL) or SKIP (a Skip, saying why).
    Without @parser: body(). With one, its arguments @args and either a fresh work directory,
    removed after (body(args, work)), or with @cluster, a name, a Cluster of the daemon
    args.daemon (body(args, cluster)) whose logs are printed when the test fails. SIGTERM
    (ctest's timeout), SIGINT and SIGHUP fail the test, so that everything is torn down."""
    from .cluster import Cluster  # cluster imports this module

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    args = parser.parse_args() if parser is not None else None
    try:
        if parser is None:
            body()
        elif cluster is None:
            work = tempfile.mkdtemp(prefix="coll-test-", dir=os.environ.get("TMPDIR", "/tmp"))
            try:
                body(args, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        else:
            with Cluster(args.daemon, cluster) as c:
                try:
                    body(args, c)
                except TestFailure:
                    c.dump()
                    raise
                if getattr(args, "dump", False):
                    c.dump()
    except Skip as e:
        log("SKIP: %s" % e)
        sys.exit(SKIP)
    except TestFailure as e:
        log("FAIL: %s" % e)
        sys.exit(1)
    log("PASS")
