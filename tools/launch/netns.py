"""--netns-prefix: each daemon (and with --netns-ranks its trainers) inside an existing network
namespace, with its address and device."""

import os
import re
import shutil
import subprocess

from .report import LaunchError

NETNS_DIR = "/run/netns"  # where `ip netns add` puts its namespace handles
NODE_FIELD_RE = re.compile(r"\{k(?:\s*\+\s*(\d+))?\}")


def node_template(template, k):
    """TEMPLATE with every {k} or {k+N} replaced by the node number (plus N)."""
    return NODE_FIELD_RE.sub(lambda m: str(k + int(m.group(1) or 0)), template)


def netns_device(ns, addr):
    """The device that carries addr inside namespace ns, from `ip -o addr show`."""
    try:
        out = subprocess.run(["ip", "-n", ns, "-o", "addr", "show"], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LaunchError("cannot run ip -n %s addr show: %s" % (ns, e))
    for line in out.stdout.splitlines():
        # "2: veth0    inet 10.9.0.1/24 brd ... scope global veth0 ..."
        fields = line.split()
        if len(fields) >= 4 and fields[3].split("/")[0] == addr.strip("[]"):
            return fields[1].split("@")[0]
    raise LaunchError("no device in network namespace %s has address %s (%s); give --netns-dev"
                      % (ns, addr, out.stderr.strip() or "ip -n %s -o addr show" % ns))


class NetnsPlan:
    """Where each daemon runs with --netns-prefix: namespace, control address and device."""

    def __init__(self, args, nodes):
        self.nodes = []
        if shutil.which("ip") is None:
            raise LaunchError("--netns-prefix needs the ip command (Debian package iproute2)")
        for k in range(nodes):
            ns = "%s%d" % (args.netns_prefix, k)
            if not os.path.exists(os.path.join(NETNS_DIR, ns)):
                raise LaunchError("network namespace %s does not exist (see ip netns list)" % ns)
            addr = node_template(args.netns_addr, k)
            dev = node_template(args.netns_dev, k) if args.netns_dev else netns_device(ns, addr)
            self.nodes.append((ns, addr, dev))

    def wrap(self, k, argv):
        """The daemon command line of node k inside its namespace."""
        ns, _, dev = self.nodes[k]
        return ["ip", "netns", "exec", ns, "env", "UCX_TLS=tcp,self",
                "UCX_NET_DEVICES=%s" % dev] + argv

    def wrap_rank(self, k, argv):
        """A trainer command line of node k inside its namespace (--netns-ranks)."""
        return ["ip", "netns", "exec", self.nodes[k][0]] + argv

    def listen(self, k):
        addr = self.nodes[k][1]
        return ("[%s]:0" if ":" in addr else "%s:0") % addr
