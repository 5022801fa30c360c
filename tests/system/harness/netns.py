"""Network namespaces a test makes for its daemons, and deletes."""

import os
import shutil
import subprocess

from .basics import Skip, TestFailure, log


class Netns:
    """N namespaces <P>0..<P>N-1, each with veth0 (10.9.0.k+1/24) whose peer p<k> sits on a
    bridge in namespace <P>sw: the same topology as bench/netns.sh, unshaped. The prefix holds
    our pid, so only what this test made is ever touched; close() deletes it all."""

    SUBNET = "10.9.0"

    def __init__(self, n):
        if os.geteuid() != 0:
            raise Skip("network namespaces need root")
        if shutil.which("ip") is None:
            raise Skip("the ip command (iproute2) is not installed")
        self.prefix = "crel%dx" % os.getpid()
        self.n = n
        self.made = []
        try:
            self._setup()
        except TestFailure:
            self.close()
            raise

    def _ip(self, *args):
        try:
            p = subprocess.run(["ip"] + list(args), stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            raise TestFailure("ip %s did not finish within 10 s" % " ".join(args))
        if p.returncode != 0:
            raise TestFailure("ip %s failed: %s" % (" ".join(args), p.stderr.strip()))

    def ns(self, k):
        return "%s%d" % (self.prefix, k)

    def addr(self, k):
        return "%s.%d" % (self.SUBNET, k + 1)

    def _add_ns(self, name):
        if os.path.exists(os.path.join("/run/netns", name)):
            raise TestFailure("namespace %s exists already; not touching it" % name)
        try:
            self._ip("netns", "add", name)
        except TestFailure as e:
            raise Skip("cannot create a network namespace here: %s" % e)
        self.made.append(name)

    def _setup(self):
        sw = self.prefix + "sw"
        self._add_ns(sw)
        self._ip("-n", sw, "link", "add", "br0", "type", "bridge")
        self._ip("-n", sw, "link", "set", "br0", "up")
        for k in range(self.n):
            ns = self.ns(k)
            self._add_ns(ns)
            self._ip("link", "add", "veth0", "netns", ns, "type", "veth", "peer", "name",
                     "p%d" % k, "netns", sw)
            self._ip("-n", ns, "addr", "add", "%s/24" % self.addr(k), "dev", "veth0")
            self._ip("-n", ns, "link", "set", "lo", "up")
            self._ip("-n", ns, "link", "set", "veth0", "up")
            self._ip("-n", sw, "link", "set", "p%d" % k, "master", "br0")
            self._ip("-n", sw, "link", "set", "p%d" % k, "up")
        log("namespaces %s0..%s%d on bridge %ssw, addresses %s.1-%d"
            % (self.prefix, self.prefix, self.n - 1, self.prefix, self.SUBNET, self.n))

    def link(self, k, up):
        """Cut (or restore) host k's cable: its port on the bridge goes down (up)."""
        self._ip("-n", self.prefix + "sw", "link", "set", "p%d" % k, "up" if up else "down")

    def wrap(self, k, argv):
        return ["ip", "netns", "exec", self.ns(k), "env", "UCX_TLS=tcp,self",
                "UCX_NET_DEVICES=veth0"] + argv

    def close(self):
        for name in reversed(self.made):
            try:
                subprocess.run(["ip", "netns", "del", name], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=10)
            except subprocess.TimeoutExpired:
                log("warning: could not delete namespace %s" % name)
        self.made = []


