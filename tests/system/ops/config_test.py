#!/usr/bin/env python3
"""The daemon's configuration (ctest label ecosystem): `config_test.py NAME ...`.

  print_config_roundtrip  `--print-config` output read back as a configuration file gives the
                          same values; '#' after a value is a comment as ';' is
  example_config          the shipped example starts a daemon on a host where the group
                          "collective" does not exist yet (before systemd-sysusers ran)
  version                 `collectived --version` names the project's version and the wire
                          protocol of proto/frame.h, as docs/operations.md quotes it
  sighup                  SIGHUP reopens log_file (rotated away) and applies the keys that may
                          change at run time to new jobs, names those that need a restart, and
                          keeps the running configuration when the file became invalid
  listen_security         the default listener is loopback; any other listener is refused
                          without a node secret unless allow_unauthenticated_peers;
                          `--make-secret` makes one (mode 0600) and keeps an existing one; a
                          daemon without one opens no control listener and says so in /status
                          (peers.mode "off")
"""

import grp
import os
import re
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import check, log  # noqa: E402


def daemon_cmd(args, *extra):
    return h.run([args.daemon] + list(extra), timeout=20, check=False, echo=False)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def values(printed):
    """{key: value} of --print-config output, comments dropped."""
    out = {}
    for line in printed.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, _, rest = line.partition("=")
        out[key.strip()] = rest.split("  #")[0].strip()
    return out


def test_print_config_roundtrip(args, work):
    conf = write(os.path.join(work, "c.conf"),
                 "[collectived]\n"
                 "socket = %s/d.sock   # a comment after a path\n"
                 "pool_size = 32M ; the other kind\n"
                 "timeout_ms = 7000# not a comment: no space before it\n"
                 "status_socket = none\n"
                 "log_subsys = job,engine  # debug output of two subsystems\n" % work)
    rc, out = daemon_cmd(args, "--config", conf, "--print-config")
    check(rc != 0 and "timeout_ms=7000# not a comment" in out,
          "'#' without a space before it was taken as a comment:\n" + out)
    write(conf, open(conf).read().replace("7000#", "7000 #"))
    rc, first = daemon_cmd(args, "--config", conf, "--print-config")
    check(rc == 0, "the file is refused:\n" + first)
    got = values(first)
    want = {"socket": "%s/d.sock" % work, "pool_size": str(32 << 20), "timeout_ms": "7000",
            "status_socket": "", "log_subsys": "job,engine", "addr_file": ""}
    check(all(got.get(k) == v for k, v in want.items()),
          "values %s, expected %s" % ({k: got.get(k) for k in want}, want))
    again = write(os.path.join(work, "printed.conf"), first)
    rc, second = daemon_cmd(args, "--config", again, "--print-config")
    check(rc == 0, "--print-config output is not a valid configuration:\n" + second)
    check(values(second) == got, "values changed on the way round:\n%s\n---\n%s"
          % (first, second))
    check(re.search(r"^pool_size = %d  # file %s:\d+$" % (32 << 20, re.escape(again)), second,
                    re.M), "origins do not name the printed file:\n" + second)


def group_exists(name):
    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


def test_example_config(args, work):
    example = os.path.join(args.source_dir, "deploy", "collectived.conf.example")
    if group_exists("collective"):
        log("group collective exists here: the example could not fail on it")
    d = h.Daemon(args.daemon, work, "ex", ["--config", example])  # the last --config counts
    try:
        d.wait_ready()
        h.status_json(d.status_sock)
        h.check_no_warnings(d.log(), "the daemon with the example configuration")
    finally:
        check(d.stop() == 0, "the daemon did not stop cleanly:\n" + d.log())


def test_version(args, work):
    cmake = open(os.path.join(args.source_dir, "CMakeLists.txt")).read()
    version = re.search(r"project\(collectived VERSION ([0-9.]+)", cmake).group(1)
    rc, out = daemon_cmd(args, "--version")
    check(rc == 0, "--version exited with %d: %s" % (rc, out))
    check(out.startswith("collectived %s " % version), "--version says %r, the project is %s"
          % (out, version))
    # The wire protocol: the code's (proto/frame.h), what the binary says, and what
    # docs/operations.md quotes, all one.
    frame = open(os.path.join(args.source_dir, "proto", "frame.h")).read()
    wire = re.search(r"#define COLL_WIRE_VERSION ([0-9]+)u", frame).group(1)
    check(out.strip() == "collectived %s (wire protocol %s)" % (version, wire),
          "--version says %r; proto/frame.h has wire protocol %s" % (out, wire))
    doc = open(os.path.join(args.source_dir, "docs", "operations.md")).read()
    quoted = re.findall(r"`(collectived [0-9.]+ \(wire protocol [0-9]+\))`", doc)
    check(quoted == [out.strip()], "docs/operations.md quotes %s, the binary says %r"
          % (quoted, out.strip()))


# ---- sighup ------------------------------------------------------------------------------------

def wait_log(path, needle, what, timeout=10):
    def found():
        try:
            return needle in open(path, errors="replace").read()
        except FileNotFoundError:
            return False
    return h.wait_until(found, timeout, what)


def job_timeout(args, d, work, job):
    """Run a 1-rank job on @d and return the timeout its /status shows while it runs."""
    env = dict(h.clean_env(), COLL_SOCKET=d.sock, COLL_JOB=job, COLL_RANK="0",
               COLL_WORLD_SIZE="1", COLL_LOCAL_RANK="0", COLL_LOCAL_SIZE="1")
    r = h.Rank(0, 0, [args.rank, "--iters", "50", "--count", "16", "--sleep-ms", "100"], env,
               os.path.join(work, "r0.out"))
    try:
        jobs = h.wait_until(lambda: [j for j in h.status_json(d.status_sock)["jobs"]
                                if j["id"] == job], 20, "job %s in /status" % job)
        return jobs[0]["timeout_ms"]
    finally:
        r.kill()


def test_sighup(args, work):
    logf = os.path.join(work, "d.log")
    conf = os.path.join(work, "d.conf")
    base = "log_file = %s\nlog_level = info\n" % logf
    write(conf, base + "timeout_ms = 60000\n")
    d = h.Daemon(args.daemon, work, "hup", ["--config", conf])
    try:
        d.wait_ready()
        wait_log(logf, "ready on", "the daemon's start in its log_file")
        check(job_timeout(args, d, work, "before") == 60000, "timeout before the reload")
        os.rename(logf, logf + ".1")  # what logrotate does
        write(conf, base + "timeout_ms = 5000\npool_size = 64M\nkernel_threads = 3\n")
        d.popen.send_signal(signal.SIGHUP)
        wait_log(logf, "reloaded on signal 1: pool_size, timeout_ms", "the reload in a new log")
        text = open(logf).read()
        check("kernel_threads changed (2 -> 3) but takes effect only when the daemon restarts"
              in text, "the restart-only key is not named:\n" + text)
        check(job_timeout(args, d, work, "after") == 5000, "timeout_ms not applied")
        wait_log(logf, "job after: created (world size 1, 1 local ranks, pool %d bytes)"
                 % (64 << 20), "pool_size applied to the new job")
        write(conf, base + "pool_size = lots\n")
        d.popen.send_signal(signal.SIGHUP)
        wait_log(logf, "reload: the configuration is invalid now", "the refused reload")
        check("pool_size=lots" in open(logf).read(), "the reason is not logged")
        check(job_timeout(args, d, work, "kept") == 5000, "an invalid file changed the daemon")
    finally:
        check(d.stop() == 0, "the daemon did not stop cleanly:\n" + d.log())


def test_listen_security(args, work):
    rc, out = daemon_cmd(args, "--config", "none", "--print-config")
    check(rc == 0 and values(out)["listen"].startswith("127.0.0.1:"),
          "the default listener is not loopback: %s" % values(out).get("listen"))
    check(values(out)["peer_secret_file"] == "/etc/collectived/peer.secret",
          "the default node secret is %s" % values(out).get("peer_secret_file"))
    missing = os.path.join(work, "missing.secret")
    for addr in ("0.0.0.0:29510", "[::]:29510", "127.0.0.1:0"):
        rc, out = daemon_cmd(args, "--config", "none", "--listen", addr, "--peer-secret-file",
                             missing, "--print-config")
        check(rc == 2 and "no node secret" in out,
              "listen %s without a node secret was accepted (%d): %s" % (addr, rc, out))
    rc, out = daemon_cmd(args, "--config", "none", "--listen", "0.0.0.0:29510",
                         "--peer-secret-file", missing, "--allow-unauthenticated-peers", "1",
                         "--print-config")
    check(rc == 0, "allow_unauthenticated_peers = 1 did not allow it: " + out)
    secret = os.path.join(work, "peer.secret")
    for _ in range(2):
        rc, out = daemon_cmd(args, "--config", "none", "--peer-secret-file", secret,
                             "--make-secret")
        check(rc == 0, "--make-secret failed: " + out)
    made = os.stat(secret)
    check(made.st_mode & 0o777 == 0o600 and made.st_size == 65 and "exists; kept" in out,
          "--make-secret made mode %o, %d bytes; the second run said: %s"
          % (made.st_mode & 0o777, made.st_size, out))
    for addr in ("0.0.0.0:29510", "[::1]:29510", "127.0.0.2:29510"):
        rc, out = daemon_cmd(args, "--config", "none", "--listen", addr, "--print-config",
                             "--peer-secret-file", secret)
        check(rc == 0, "listen %s with a secret refused: %s" % (addr, out))
    peers_off(args, work)


def peers_off(args, work):
    """A daemon without a node secret (here none on purpose; the default file missing does the
    same): up, single-node jobs only, no control listener, said in /status."""
    d = h.Daemon(args.daemon, work, "nopeers", ["--peer-secret-file", ""],
                 peers=False).wait_ready()
    try:
        peers = h.status_json(d.status_sock)["node"]["peers"]
        check(peers["mode"] == "off" and "peer_secret_file" in peers["why"],
              "peers of a daemon without a secret: %s\n%s" % (peers, d.log()))
        check(not os.path.exists(d.addr_file), "it wrote a control address")
        h.check_no_warnings(d.log(), "a daemon without a node secret")
    finally:
        check(d.stop() == 0, "the daemon did not stop cleanly:\n" + d.log())


TESTS = {name[len("test_"):]: fn for name, fn in globals().items() if name.startswith("test_")}

if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), h.named_parser(__doc__, TESTS))
