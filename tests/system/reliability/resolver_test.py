#!/usr/bin/env python3
"""COLL_ROOT by name: every address the resolver gives is tried, in its order.

Two daemons run in a network namespace of their own whose /etc/hosts and /etc/gai.conf
(ip netns exec binds /etc/netns/<name>/*) make the root's name resolve, in this order, to
  10.255.255.1  routed to a veth whose far end answers nothing: a black hole (a connect there
                waits ~3 s for "no route to host"; the daemon gives each address 1 s),
  ::1           nobody listens on IPv6: refused at once,
  127.0.0.1     where the root listens.
A job whose COLL_ROOT is that name must form and allreduce correctly, its rendezvous taking
about one attempt's bound (the black hole) and not the job's timeout. Then a COLL_ROOT of
"fd00::1:2" (an IPv6 address with a port, unbracketed) must fail at once with a message that
shows the bracketed form "[fd00::1]:2".

Exit status: 0 pass, 1 fail, 77 skip (no root, no ip command, no namespaces).
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import Skip, TestFailure, check, log  # noqa: E402

NAME = "collroot"


class NameNetns:
    """Namespace <P> (the daemons') and <P>x (the black hole's far end), with the resolver
    files; close() removes them all."""

    def __init__(self):
        if os.geteuid() != 0 or shutil.which("ip") is None:
            raise Skip("network namespaces need root and the ip command")
        self.ns = "cres%d" % os.getpid()
        self.etc = os.path.join("/etc/netns", self.ns)
        self.made = []
        try:
            self._setup()
        except TestFailure:
            self.close()
            raise

    def _ip(self, *args):
        p = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=10,
                           stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise TestFailure("ip %s failed: %s" % (" ".join(args), p.stderr.strip()))

    def _setup(self):
        for name in (self.ns, self.ns + "x"):
            if os.path.exists(os.path.join("/run/netns", name)):
                raise TestFailure("namespace %s exists already; not touching it" % name)
            try:
                self._ip("netns", "add", name)
            except TestFailure as e:
                raise Skip("cannot create a network namespace here: %s" % e)
            self.made.append(name)
        self._ip("-n", self.ns, "link", "set", "lo", "up")
        self._ip("link", "add", "bh0", "netns", self.ns, "type", "veth", "peer", "name", "bh1",
                 "netns", self.ns + "x")
        self._ip("-n", self.ns, "addr", "add", "10.255.254.1/16", "dev", "bh0")
        self._ip("-n", self.ns, "link", "set", "bh0", "up")
        self._ip("-n", self.ns + "x", "link", "set", "bh1", "up")
        os.makedirs(self.etc)
        with open(os.path.join(self.etc, "hosts"), "w") as f:
            f.write("127.0.0.1 %s\n10.255.255.1 %s\n::1 %s\n" % (NAME, NAME, NAME))
        with open(os.path.join(self.etc, "gai.conf"), "w") as f:
            f.write("precedence ::ffff:10.255.255.0/120 100\nprecedence ::1/128 90\n"
                    "precedence ::ffff:0:0/96 10\n")

    def resolved(self):
        out = subprocess.run(["ip", "netns", "exec", self.ns, "getent", "ahosts", NAME],
                             capture_output=True, text=True, timeout=10).stdout.split("\n")
        order = []
        for line in out:
            if line and line.split()[0] not in order:
                order.append(line.split()[0])
        return order

    def addr(self, k):
        return "127.0.0.1"

    def wrap(self, k, argv):
        return ["ip", "netns", "exec", self.ns] + argv

    def close(self):
        for name in reversed(self.made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
        self.made = []
        shutil.rmtree(self.etc, ignore_errors=True)


def body(args, c):
    ns = NameNetns()
    try:
        order = ns.resolved()
        log("%s resolves to %s" % (NAME, order))
        check(order == ["10.255.255.1", "::1", "127.0.0.1"], "the namespace's resolver gives "
              "%s, not the black hole, then ::1, then 127.0.0.1" % order)
        c.start_daemons(2, netns=ns)
        port = c.daemons[0].addr.rsplit(":", 1)[1]
        t0 = time.monotonic()
        job = c.start_job("by-name", [0, 1], 1,
                          [os.path.abspath(args.fault_rank), "--count", "4099", "--iters", "3",
                           "--progress", "0"],
                          timeout_ms=20000, env={"COLL_ROOT": "%s:%s" % (NAME, port)})
        job.wait_event("JOINED", timeout=15)
        took = float(job.rank(1).event("JOINED")["t_mono"]) - t0
        job.wait_exit(30, expect=0)
        log("the job formed through %s:%s in %.2f s and allreduced correctly" % (NAME, port, took))
        check(took < 5.0, "the rendezvous took %.2f s: the addresses were not tried in turn, "
              "each within its bound" % took)
        bad = c.start_job("ambiguous", [0], 1, [os.path.abspath(args.fault_rank)],
                          timeout_ms=20000, env={"COLL_ROOT": "fd00::1:2",
                                                 "COLL_WORLD_SIZE": "2"})
        bad.wait_exit(10, expect=4)
        err = bad.rank(0).text("err")
        log("COLL_ROOT=fd00::1:2: %s" % err.strip())
        check("[fd00::1]:2" in err, "the error does not show the bracketed form: %s" % err)
        c.check_no_crash()
        c.stop_daemons()
    finally:
        for d in c.daemons:
            if d.exit_code is None:
                d.exit_code = d.stop(10.0)
        ns.close()


def parser():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemon", required=True)
    p.add_argument("--fault-rank", required=True)
    return p


if __name__ == "__main__":
    h.main(body, parser(), cluster="resolver")
