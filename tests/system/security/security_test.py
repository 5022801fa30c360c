#!/usr/bin/env python3
"""Hostile local users against collectived's sockets and limits, one case per run.

Real daemons (each with the cluster's node secret, as collective-launch and the installed
service give them), real UCX, real trainer processes (fault_rank); the harness
(tests/system/harness) starts and tears them down. What each case does, and what must hold:

  forged_join       A 2-node job without a token gathers at its root (rank 0 joined, rank 1 not
                    yet started). A process of another uid (nobody, via setpriv) connects to the
                    root's control port and sends one NodeJoin claiming rank 1 with a made-up
                    64-byte UCX worker address: once with the digest of the empty token (what
                    anyone computes from the job id), once with another digest. The root answers
                    neither with a node table (the forger sees only the challenge), closes both
                    links, logs "rejected peer" and counts them (connections_refused_total
                    {listener="control",reason="auth"} = 2). Then the real rank 1 starts and the
                    job allreduces correctly; the root never crashes.
  flood             64 connections to the control port each send up to 16 MiB: 32 announce a
                    16 MiB frame, 32 announce one of exactly peer_handshake_bytes and trickle
                    it. The daemon closes every one (refused: 32 "protocol", 32
                    "handshake_bytes"), and its peak RSS (VmHWM) grows by less than 16 MiB
                    (64 x peer_handshake_bytes of input, plus a small buffer each).
  fd_exhaustion     The daemon's descriptor limit lowered to 160 (prlimit), 200 connections
                    opened to its control port (which lets them all stay, and from one
                    address): those that would leave fewer than fd_reserve
                    (64) descriptors free are closed at once (logged, counted "fd_reserve"),
                    and a local job (1 node x 2 ranks) still allreduces correctly. Then
                    connections to the client socket until the daemon runs out of descriptors:
                    logged ("out of file descriptors") and counted ("fd_limit"); once they
                    closed, a local job works again.
  double_formation  Two launches of one job id and token on one node (1 x 2 each, different
                    data): (a) ranks A0 and B1 form the job, then A1 and B0 join: the job fails
                    on A0 and B1 before their first operation ("second formation") and A1 and
                    B0 are refused; no rank reports a result. (b) A0 gathers, B0 joins with the
                    same local rank: A0's join fails, B0, A1, B1 are refused alike.
  status_burst      200 connects at once to the status socket (non-blocking): none refused
                    (the listen backlog is the kernel's SOMAXCONN), and all 200 get GET /status
                    answered (status_max_connections at a time).
  ipv6_fail_fast    The daemon runs in a network namespace without IPv6; a 2-node job names
                    COLL_ROOT=[::1]:PORT. Its rank fails with COLL_ERR_RENDEZVOUS saying the
                    host cannot reach that address, not COLL_ERR_TIMEDOUT at the job's timeout.

Exit status: 0 pass, 1 fail (with the daemons' logs and the ranks' output), 77 skip (says why).
"""

import argparse
import hashlib
import os
import re
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import Skip, TestFailure, check, log  # noqa: E402

WIRE_VERSION = 8     # proto/frame.h COLL_WIRE_VERSION
HANDSHAKE_BYTES = 1024  # the default peer_handshake_bytes
PY = "/usr/bin/python3"  # the forger runs as nobody, which may not reach a user's Python


# ---- protobuf by hand (proto/collective.proto: PeerMsg, NodeJoin) ------------------------------

def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    """A varint field for an int, a length-delimited one for bytes or str."""
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def node_join_frame(job, world, rank, address, digest):
    join = (field(1, job) + field(2, world) + field(3, varint(rank)) + field(4, address) +
            field(5, "forger") + field(8, 4242))
    if digest is not None:
        join += field(7, digest)
    msg = field(1, WIRE_VERSION) + field(2, join)
    return struct.pack("<I", len(msg)) + msg


def empty_token_digest(job):
    """base/auth.h's digest of the empty token: BLAKE2b-256 keyed by BLAKE2b-256 of the job id,
    computable by anyone who knows the job id."""
    key = hashlib.blake2b(job.encode(), digest_size=32).digest()
    return hashlib.blake2b(b"", digest_size=32, key=key).digest()


def forge(host, port, frame_hex):
    """Run as nobody: send one frame, then report the frames' body fields that came back."""
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(bytes.fromhex(frame_hex))
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    bodies = []
    while len(data) >= 4:
        n = struct.unpack("<I", data[:4])[0]
        payload, data = data[4:4 + n], data[4 + n:]
        # The body of a PeerMsg is its field 2..6, after version (field 1, a varint).
        i = 0
        while i < len(payload):
            key = payload[i]
            i += 1
            if key & 7 == 0:
                while payload[i] & 0x80:
                    i += 1
                i += 1
            else:
                bodies.append(key >> 3)
                ln, shift = 0, 0
                while True:
                    b = payload[i]
                    i += 1
                    ln |= (b & 0x7F) << shift
                    shift += 7
                    if not b & 0x80:
                        break
                i += ln
    print("BODIES %s" % ",".join(str(b) for b in bodies), flush=True)


def run_forger(addr, frame):
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not os.path.exists(PY):
        raise Skip("needs root, setpriv and %s to send as another user" % PY)
    host, port = addr.rsplit(":", 1)
    argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", PY,
            os.path.abspath(__file__), "--forge", host, port, frame.hex()]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    check(p.returncode == 0, "the forger failed (%d): %s" % (p.returncode, p.stderr))
    m = re.search(r"^BODIES (.*)$", p.stdout, re.M)
    check(m is not None, "the forger said nothing: %s %s" % (p.stdout, p.stderr))
    return [int(b) for b in m.group(1).split(",") if b]


# ---- helpers ------------------------------------------------------------------------------------

def metric(d, name, labels):
    try:
        code, body = h.http_get(d.status_sock, "/metrics", 5.0)
    except OSError as e:
        raise TestFailure("node %d: GET /metrics failed: %s" % (d.node, e))
    check(code == 200, "node %d: GET /metrics answered %d" % (d.node, code))
    want = "%s{%s} " % (name, labels)
    for line in body.splitlines():
        if line.startswith(want):
            return float(line[len(want):])
    raise TestFailure("node %d: no sample %s{%s} in /metrics" % (d.node, name, labels))


def refused(d, reason, listener="control"):
    return metric(d, "collectived_connections_refused_total",
                  'listener="%s",reason="%s"' % (listener, reason))


def expect_log(d, pattern, what):
    lines = [t for _, _, _, t in d.log_lines() if re.search(pattern, t)]
    check(lines, "node %d logged no line matching '%s' (%s)" % (d.node, pattern, what))
    log("node %d logged: %s" % (d.node, lines[0]))
    return lines


def vm(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise TestFailure("no %s in /proc/%d/status" % (key, pid))


def rank_argv(args, *extra):
    return [args.fault_rank, "--count", "1000", "--iters", "3", "--progress", "0"] + list(extra)


# ---- cases --------------------------------------------------------------------------------------

def case_forged_join(args, c):
    d0, d1 = c.start_daemons(2)
    job = c.start_job("forged", [0, 1], 1, rank_argv(args), timeout_ms=30000, token=None,
                      ranks=[0])
    h.wait_until(lambda: (d0.job("forged") or {}).get("state") == "rendezvous", 20,
                 "job forged to wait for its rendezvous at node 0")
    address = bytes([0x07]) + secrets.token_bytes(63)  # no version UCX knows
    for what, digest in (("the empty token's digest", empty_token_digest("forged")),
                         ("another digest", secrets.token_bytes(32))):
        bodies = run_forger(d0.addr, node_join_frame("forged", 2, 1, address, digest))
        log("forger (uid nobody, %s) received bodies %s" % (what, bodies))
        check(3 not in bodies, "the root answered the forger (%s) with a node table" % what)
        check(d0.alive(), "node 0 died after the forged NodeJoin (%s):\n%s"
              % (what, d0.text()[-3000:]))
    expect_log(d0, r"^rejected peer 127\.0\.0\.1:\d+: it sent another message before "
               r"authenticating", "the forged NodeJoins")
    check(refused(d0, "auth") == 2, "node 0 counted %d auth refusals, expected 2"
          % refused(d0, "auth"))
    c.start_rank(job, 1)
    job.wait_exit(60, expect=0)
    log("job forged formed with its real rank 1 and allreduced correctly")
    c.check_no_crash()
    c.stop_daemons()


def flood_one(addr, announce, result, i):
    """One connection that announces a frame of @announce bytes and sends up to 16 MiB; its
    result: (bytes sent, whether the daemon closed it)."""
    host, port = addr.rsplit(":", 1)
    sent, closed = 0, False
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(struct.pack("<I", announce))
        chunk = b"\0" * 65536
        while sent < (16 << 20):
            s.sendall(chunk)
            sent += len(chunk)
        while s.recv(65536):
            pass
        closed = True
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    except OSError:
        pass
    result[i] = (sent, closed)


def case_flood(args, c):
    d = c.start_daemons(1)[0]
    base = vm(d.pid, "VmHWM")
    result = [None] * 64
    threads = [threading.Thread(target=flood_one,
                                args=(d.addr, (16 << 20) if i % 2 else HANDSHAKE_BYTES, result, i))
               for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(all(r is not None and r[1] for r in result), "not every flooding connection was "
          "closed by the daemon: %s" % result)
    peak = vm(d.pid, "VmHWM")
    log("peak RSS %.1f MiB before the flood, %.1f MiB after; each connection got through at "
        "most %d bytes" % (base / 2**20, peak / 2**20, max(r[0] for r in result)))
    check(peak - base < 16 << 20, "the daemon's peak RSS grew by %.1f MiB under 64 x 16 MiB, "
          "more than 16 MiB" % ((peak - base) / 2**20))
    check(refused(d, "protocol") == 32 and refused(d, "handshake_bytes") == 32,
          "refusals: protocol %d, handshake_bytes %d; expected 32 each"
          % (refused(d, "protocol"), refused(d, "handshake_bytes")))
    expect_log(d, r"^rejected peer .*before it authenticated \(peer_handshake_bytes 1024\)",
               "a connection over its handshake bytes")
    c.check_no_crash()
    c.stop_daemons()


def local_job(args, c, name):
    job = c.start_job(name, [0], 2, rank_argv(args), timeout_ms=20000)
    job.wait_exit(60, expect=0)
    log("local job %s allreduced correctly" % name)


def case_fd_exhaustion(args, c):
    # Connections stay until the test closes them, and any number may come from 127.0.0.1.
    d = c.start_daemons(1, args=["--peer-handshake-ms", "60000", "--peer-max-per-address",
                                 "1000"])[0]
    subprocess.run(["prlimit", "--pid", str(d.pid), "--nofile=160:160"], check=True,
                   timeout=10)
    host, port = d.addr.rsplit(":", 1)
    conns = [socket.create_connection((host, int(port)), timeout=10) for _ in range(200)]
    time.sleep(0.5)  # the daemon accepts (and refuses) them all by then
    alive = 0
    for s in conns:
        s.setblocking(False)
        try:
            alive += s.recv(4096) != b""  # the challenge: still open
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    log("%d of 200 control connections stay open; %d refused for the reserve"
        % (alive, refused(d, "fd_reserve")))
    check(0 < alive < 200 and refused(d, "fd_reserve") == 200 - alive,
          "%d stay open, %d refused for the reserve" % (alive, refused(d, "fd_reserve")))
    expect_log(d, r"kept for local jobs \(fd_reserve\)", "the reserve")
    local_job(args, c, "local-a")
    clients = []
    try:
        for _ in range(200):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(d.sock)
            clients.append(s)
        # No status request meanwhile: the status listener has no descriptor either.
        h.wait_until(lambda: any("client socket: out of file descriptors" in t
                                 for _, _, _, t in d.log_lines()), 10,
                     "the client socket to run out of descriptors")
    finally:
        for s in clients:
            s.close()
    h.wait_until(lambda: d.status()["node"]["sessions"] == 0, 10, "the clients to close")
    check(refused(d, "fd_limit", "client") > 0, "the descriptor limit was not counted")
    local_job(args, c, "local-b")
    for s in conns:
        s.close()
    check(d.alive(), "the daemon died")
    c.check_no_crash()
    c.stop_daemons()


def formation(args, c, name, first, second):
    """Start the ranks of two launches A and B (same id and token, seeds 1 and 2) in the order
    @first (each waits until its daemon counts it), then @second; returns the four ranks."""
    jobs = {}
    for launch, seed in (("A", "1"), ("B", "2")):
        jobs[launch] = c.start_job(name, [0], 2, rank_argv(args, "--seed", seed, "--hold-start"),
                                   timeout_ms=20000, token="sametoken", ranks=[])
    procs = {}
    for who in first:
        procs[who] = c.start_rank(jobs[who[0]], int(who[1]), label="%s.%s" % (name, who))
        h.wait_until(lambda: "JOINED" in procs[who].text() or
                     (c.daemons[0].job(name) or {}).get("joined", 0) >= len(procs), 20,
                     "%s to join" % who)
    for who in second:
        procs[who] = c.start_rank(jobs[who[0]], int(who[1]), label="%s.%s" % (name, who))
        h.wait_until(lambda: not procs[who].alive(), 20, "%s to be refused" % who)
    return procs


def expect_refused(p, pattern):
    ev = p.event("JOINFAIL")
    check(ev is not None and ev["status"] == "COLL_ERR_RENDEZVOUS",
          "%s: expected JOINFAIL COLL_ERR_RENDEZVOUS, got %s:\n%s%s"
          % (p.label, ev, p.text(), p.text("err")))
    check(re.search(pattern, p.text("err")), "%s: the reason does not match '%s': %s"
          % (p.label, pattern, p.text("err")))


def case_double_formation(args, c):
    c.start_daemons(1)
    # (a) A0 and B1 form the job; then A1 and B0 arrive.
    procs = formation(args, c, "twice", ["A0", "B1"], ["A1", "B0"])
    for who in ("A0", "B1"):
        h.wait_until(lambda: "HOLDING" in procs[who].text(), 20, "%s to hold" % who)
    for who in ("A1", "B0"):
        expect_refused(procs[who], r"second formation")
    for who in ("A0", "B1"):
        procs[who].release()
    for who in ("A0", "B1"):
        code = procs[who].popen.wait(30)
        ev = procs[who].event("FAILED")
        check(code == 3 and ev is not None and ev["status"] == "COLL_ERR_RENDEZVOUS" and
              "second formation" in ev.get("msg", ""),
              "%s of the merged job: exit %d, %s (expected its first operation to fail with "
              "COLL_ERR_RENDEZVOUS, second formation):\n%s%s"
              % (who, code, ev, procs[who].text(), procs[who].text("err")))
    log("merged formation: every rank failed, none reported a result")
    # (b) A0 gathers; B0 claims the same local rank.
    procs = formation(args, c, "twice-b", ["A0"], ["B0", "A1", "B1"])
    for who in ("A0", "B0", "A1", "B1"):
        h.wait_until(lambda: not procs[who].alive(), 20, "%s to exit" % who)
        expect_refused(procs[who], r"second formation")
    log("gathering formation: all four refused")
    c.check_no_crash()
    c.stop_daemons()


def case_status_burst(args, c):
    d = c.start_daemons(1)[0]
    socks, refused_now = [], 0
    for _ in range(200):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(d.status_sock)
            socks.append(s)
        except BlockingIOError:
            refused_now += 1
            s.close()
    check(refused_now == 0, "%d of 200 connects to the status socket were refused"
          % refused_now)
    answered = 0
    for s in socks:
        s.setblocking(True)
        s.settimeout(20)
        s.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    for s in socks:
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        answered += data.startswith(b"HTTP/1.1 200") and b'"jobs"' in data
        s.close()
    check(answered == 200, "%d of 200 status requests were answered" % answered)
    log("200 status connects at once: none refused, all answered")
    c.stop_daemons()


class NoIpv6:
    """A network namespace of the daemon's own (unshare -n) with loopback up and IPv6 off."""

    def addr(self, k):
        return "127.0.0.1"

    def wrap(self, k, argv):
        return ["unshare", "-n", "sh", "-c", "ip link set lo up && sysctl -qw "
                "net.ipv6.conf.all.disable_ipv6=1 && exec \"$@\"", "sh"] + argv


def case_ipv6_fail_fast(args, c):
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        raise Skip("needs root, unshare and ip for a network namespace without IPv6")
    probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up && sysctl -qw "
                            "net.ipv6.conf.all.disable_ipv6=1"], capture_output=True, text=True,
                           timeout=10)
    if probe.returncode != 0:
        raise Skip("cannot make a network namespace without IPv6 here: %s" % probe.stderr.strip())
    d = c.start_daemons(1, netns=NoIpv6())[0]
    job = c.start_job("v6", [0, 0], 1, rank_argv(args), timeout_ms=60000, token=None,
                      env={"COLL_ROOT": "[::1]:29510"}, ranks=[0])
    job.wait_event("JOINFAIL", timeout=70)
    ev = job.rank(0).event("JOINFAIL")
    err = job.rank(0).text("err")
    check(ev["status"] == "COLL_ERR_RENDEZVOUS" and "cannot reach that address" in err,
          "the rank got %s, expected COLL_ERR_RENDEZVOUS saying the address cannot be reached:"
          " %s" % (ev["status"], err))
    log("COLL_ROOT=[::1] without IPv6: %s" % err.strip().splitlines()[-1])
    check(d.alive(), "the daemon died")
    c.stop_daemons()


CASES = {"forged_join": case_forged_join, "flood": case_flood,
         "fd_exhaustion": case_fd_exhaustion, "double_formation": case_double_formation,
         "status_burst": case_status_burst, "ipv6_fail_fast": case_ipv6_fail_fast}


def parser():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemon", required=True, help="collectived binary")
    p.add_argument("--fault-rank", required=True, help="fault_rank binary")
    p.add_argument("--case", required=True, choices=sorted(CASES))
    p.add_argument("--dump", action="store_true",
                   help="print the daemons' logs and the ranks' output also when the test passes")
    return p


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--forge":
        forge(*sys.argv[2:])
        sys.exit(0)
    a = parser().parse_args()
    a.fault_rank = os.path.abspath(a.fault_rank)
    h.main(lambda args, c: CASES[args.case](args, c), parser(), cluster="sec-" + a.case)
