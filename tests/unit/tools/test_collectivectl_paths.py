#!/usr/bin/env python3
"""`collectivectl status` says each job's shared-memory and direct paths in words (ctest -L ops).

The cases a real job of the system tests (ops.status_running: a 2 x 2 job with the direct path
on; ops.collectivectl: one node) does not reach, from a /status document served here on a Unix
socket in the daemon's form: the direct path off at the root (direct_max_bytes 0), a node whose
leader has no address, a job before its rendezvous, the shared-memory path off, and a daemon
whose /status has no `shm`. And `collectivectl stalled` on collectives waiting in shared memory:
the node its leader waits for in the direct rounds, and no daemon's sends for the others. And
the control line of a daemon without a node secret (no control listener) or peers
unauthenticated.
"""

import argparse
import http.server
import json
import os
import socketserver
import subprocess
import sys
import tempfile
import threading
import unittest

CTL = None  # the collectivectl script (--ctl)


def job(job_id, nodes=2, epoch=7, state="ready", **shm):
    """A job of @nodes nodes x 2 ranks, this node's local rank 0 being rank 2, with @shm."""
    s = {"max_bytes": 0, "node_max_bytes": 16384, "operations": 5, "posted": 9,
         "direct_max_bytes": 65536, "leader_address": "00" * 40}
    s.update(shm)
    return {"id": job_id, "state": state, "world_size": 2 * nodes, "local_size": 2, "joined": 2,
            "nodes": nodes, "epoch": epoch, "operations": [],
            "members": [{"rank": 3, "local_rank": 1}, {"rank": 2, "local_rank": 0}],
            "pool": {"bytes": 1 << 30, "used_bytes": 0}, "shm": s}


STATUS = {"version": "0.1.0", "uptime_s": 1,
          "node": {"hostname": "h", "pid": 1, "control_addr": "h:29511"},
          "jobs": [job("zero", direct_max_bytes=0, leader_address=None),
                   job("noaddr", leader_address=None),
                   job("early", nodes=1, epoch=0, state="gathering", max_bytes=1 << 20,
                       node_max_bytes=0),
                   job("shmoff", nodes=1, max_bytes=0, node_max_bytes=0),
                   job("nodeoff", node_max_bytes=0, direct_max_bytes=4096)]}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(self.server.doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def address_string(self):
        return "unix"

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def status_text(doc, command="status"):
    """stdout of `collectivectl COMMAND` against a daemon serving @doc."""
    with tempfile.TemporaryDirectory(prefix="collectivectl-paths-") as tmp:
        srv = Server(os.path.join(tmp, "status.sock"), Handler)
        srv.doc = doc
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        try:
            p = subprocess.run([CTL, "--socket", srv.server_address, "--timeout", "10",
                                ] + command.split(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=30)
        finally:
            srv.shutdown()
            srv.server_close()
            t.join(10)
    if p.returncode != 0:
        raise AssertionError("collectivectl %s: exit %d: %s" % (command, p.returncode, p.stderr))
    return p.stdout.splitlines()


class Paths(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lines = status_text(STATUS)

    def assertLine(self, line):
        self.assertIn(line, self.lines, "\n".join(self.lines))

    def test_direct_off_at_the_root(self):
        self.assertLine("  job zero: direct: off (direct_max_bytes 0 at the root, or dropped for "
                        "a leader without a usable UCX address: the root's log says which)")

    def test_leader_without_address(self):
        self.assertLine("  job noaddr: direct: allreduces up to 64.0 KiB between the nodes' "
                        "leaders; this node's leader has no address")

    def test_before_the_rendezvous(self):
        self.assertLine("  job early: shm, direct: not decided yet (gathering)")
        self.assertFalse([x for x in self.lines if x.startswith("  job early: direct")])

    def test_shm_off(self):
        self.assertLine("  job shmoff: shm: off (shm_max_bytes 0); 5 of 9 posted completed there")
        self.assertLine("  job shmoff: direct: off (one node)")
        self.assertLine("  job nodeoff: shm: none reduced on each node for the daemons "
                        "(shm_node_max_bytes 0); 5 of 9 posted completed there")
        self.assertLine("  job nodeoff: direct: allreduces up to 4.0 KiB between the nodes' "
                        "leaders (here rank 2, UCX address 40 bytes)")

    def test_control_listener(self):
        """The control line names the listener's address, or says there is none and why (no
        node secret), as /status's peers do; never a bare "control"."""
        self.assertTrue(self.lines[1].endswith("; control h:29511"), self.lines)
        node = {"hostname": "h", "pid": 1, "control_addr": "",
                "peers": {"mode": "off", "why": 'peer_secret_file is ""'}}
        lines = status_text(dict(STATUS, node=node, jobs=[]))
        self.assertTrue(lines[1].endswith('; control off (no node secret: peer_secret_file is "": '
                                          'single-node jobs only)'), lines)
        node = dict(node, peers={"mode": "off", "why": "no node secret (/x/peer.secret: No "
                                                        "such file or directory)"})
        lines = status_text(dict(STATUS, node=node, jobs=[]))
        self.assertTrue(lines[1].endswith("; control off (no node secret (/x/peer.secret: No "
                                          "such file or directory): single-node jobs only)"),
                        lines)
        node = {"hostname": "h", "pid": 1, "control_addr": "h:7",
                "peers": {"mode": "unauthenticated", "why": "x"}}
        lines = status_text(dict(STATUS, node=node, jobs=[]))
        self.assertTrue(lines[1].endswith("; control h:7 (peers unauthenticated: no node "
                                          "secret)"), lines)

    def test_daemon_without_shm(self):
        old = dict(STATUS, jobs=[dict(job("old"))])
        del old["jobs"][0]["shm"]
        lines = status_text(old)
        self.assertTrue(any(x.startswith("old ") for x in lines), lines)
        self.assertFalse([x for x in lines if x.startswith("  job old")], lines)


def shm_op(name, **more):
    """An allreduce every local rank posted in shared memory, 5 s ago, as /status lists it."""
    op = {"name": name, "collective": "allreduce", "key": 1, "dtype": "float32", "count": 256,
          "state": "running", "age_ms": 5000.0, "path": "shm", "submitted_ranks": [2, 3],
          "missing_ranks": []}
    op.update(more)
    return op


class StalledShm(unittest.TestCase):
    def test_waiting_on_a_node_or_nothing_known(self):
        j = job("stall")
        j["operations"] = [shm_op("allreduce #1", waiting_on_nodes=[
                               {"node": 1, "host": "h1", "ranks": [0, 1]}]),
                           shm_op("allreduce #2")]
        rows = [x.split() for x in status_text(dict(STATUS, jobs=[j]), "stalled")]
        self.assertIn(["h:29511", "stall", "allreduce", "#1", "running", "shm", "5.0", "s", "waiting",
                       "on", "node", "1", "(h1)"], rows)
        self.assertIn(["h:29511", "stall", "allreduce", "#2", "running", "shm", "5.0", "s", "-"], rows)

    def test_daemon_without_control_address(self):
        """A daemon with no control listener is named as it was asked (its status socket)."""
        j = job("stall")
        j["operations"] = [shm_op("allreduce #1")]
        node = {"hostname": "h", "pid": 1}
        rows = [x.split() for x in status_text(dict(STATUS, node=node, jobs=[j]), "stalled")]
        self.assertTrue(rows[1][0].endswith("/status.sock"), rows)
        self.assertEqual(rows[1][1:], ["stall", "allreduce", "#1", "running", "shm", "5.0", "s",
                                       "-"])


def main():
    global CTL
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ctl", required=True, help="the collectivectl script")
    args, rest = p.parse_known_args()
    CTL = args.ctl
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
