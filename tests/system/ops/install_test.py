#!/usr/bin/env python3
"""Installed-tree tests (ctest label ops): `install_test.py NAME --daemon ... --rank ... --ctl ...`
(the arguments of ops_test.py; only --build-dir and --source-dir are used).

  systemd_units      systemd-analyze verify, systemd-tmpfiles and systemd-sysusers accept the
                     installed units and files; the units run as their own user with no
                     capability and `systemd-analyze security` rates them below 3.0
  install_pkgconfig  cmake --install into a temporary prefix; a program built with pkg-config
                     runs an allreduce on the installed daemon; the Slurm and k8s examples parse
"""
import glob
import os
import re
import shutil
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import Skip, check, log  # noqa: E402


# ---- systemd_units -----------------------------------------------------------------------------

def install_tree(args, work):
    prefix = os.path.join(work, "prefix")
    h.run(["cmake", "--install", args.build_dir, "--prefix", prefix], timeout=240,
          echo=False)
    return prefix


# The units' exposure must stay below this (`systemd-analyze security`; docs/operations.md).
MAX_EXPOSURE = 3.0


def exposure(unit_path):
    """The overall exposure `systemd-analyze security --offline=yes` gives the unit file."""
    rc, out = h.run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                     unit_path], check=False, echo=False, cwd=os.path.dirname(unit_path))
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out)
    check(m is not None, "systemd-analyze security printed no score (%d):\n%s" % (rc, out))
    return float(m.group(1)), out


def test_systemd_units(args, work):
    if shutil.which("systemd-analyze") is None:
        raise Skip("systemd-analyze not found (Debian package systemd)")
    prefix = install_tree(args, work)
    units = os.path.join(prefix, "lib", "systemd", "system")
    for unit in ("collectived.service", "collectived@.service"):
        path = os.path.join(units, unit)
        text = open(path).read()
        check("ExecStart=%s/sbin/collectived " % prefix in text, "%s: ExecStart" % unit)
        rc, out = h.run(["systemd-analyze", "verify", "--man=no", path], check=False)
        check(rc == 0 and not out.strip(), "systemd-analyze verify %s: %s" % (unit, out))
        for want in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "ProtectSystem=strict",
                     "/dev/shm", "ExecReload=", "User=collectived", "Group=collective",
                     "\nCapabilityBoundingSet=\n", "\nAmbientCapabilities=\n"):
            check(want in text, "%s lacks %r" % (unit, want.strip()))
        score, out = exposure(path)
        log("%s: systemd-analyze security exposure %.1f" % (unit, score))
        check(score < MAX_EXPOSURE, "%s: exposure %.1f, not below %.1f:\n%s"
              % (unit, score, MAX_EXPOSURE, out))
    root = os.path.join(work, "root")
    os.makedirs(os.path.join(root, "etc"))
    h.run(["systemd-sysusers", "--root", root,
           os.path.join(prefix, "lib", "sysusers.d", "collectived.conf")])
    group = re.search(r"^collective:x:(\d+):", open(os.path.join(root, "etc", "group")).read(),
                      re.M)
    user = re.search(r"^collectived:x:\d+:(\d+):",
                     open(os.path.join(root, "etc", "passwd")).read(), re.M)
    check(group and user and user.group(1) == group.group(1),
          "systemd-sysusers did not make user collectived in group collective")
    h.run(["systemd-tmpfiles", "--create", "--root", root,
           os.path.join(prefix, "lib", "tmpfiles.d", "collectived.conf")])
    check(os.path.isdir(os.path.join(root, "run", "collectived")),
          "systemd-tmpfiles did not create /run/collectived")


# ---- install_pkgconfig -------------------------------------------------------------------------

def test_install_pkgconfig(args, work):
    prefix = install_tree(args, work)
    for rel in ("sbin/collectived", "bin/collectivectl", "bin/collective-launch",
                "include/collective.h", "share/doc/collectived/collectived.conf.example",
                "share/doc/collectived/deploy/k8s/daemonset.yaml",
                "share/doc/collectived/deploy/slurm/train.sbatch",
                "share/doc/collectived/deploy/prometheus/collectived.yml",
                "lib/tmpfiles.d/collectived.conf", "lib/sysusers.d/collectived.conf",
                "lib/systemd/system/collectived.service"):
        check(os.path.exists(os.path.join(prefix, rel)), "not installed: %s" % rel)
    pcs = glob.glob(os.path.join(prefix, "lib*", "**", "collective.pc"), recursive=True)
    check(len(pcs) == 1, "collective.pc: %s" % pcs)
    env = dict(h.clean_env(), PKG_CONFIG_PATH=os.path.dirname(pcs[0]))
    _, flags = h.run(["pkg-config", "--cflags", "--libs", "collective"], env=env)
    _, libdir = h.run(["pkg-config", "--variable=libdir", "collective"], env=env)
    app = os.path.join(work, "app")
    src = os.path.join(args.source_dir, "tests", "system", "ops", "ops_rank.c")
    h.run(["cc", "-std=c11", "-Wall", "-Werror", "-o", app, src] + flags.split() +
          ["-Wl,-rpath," + libdir.strip()], env=env)
    _, out = h.run(["ldd", app], echo=False)
    check(os.path.join(libdir.strip(), "libcollective.so") in out,
          "the program does not use the installed library:\n" + out)
    # The installed launcher finds the installed daemon (../sbin/collectived).
    rc, out = h.run([os.path.join(prefix, "bin", "collective-launch"), "--nodes", "2",
                     "--ranks-per-node", "2", "--timeout", "120", "--", app, "--iters", "3",
                     "--count", "100003"], timeout=150, env=env)
    check(out.count(": done") == 4, "not every rank finished:\n" + out)
    check_examples(args, prefix)


def check_examples(args, prefix):
    """The Slurm example parses (libcollective reads the Slurm variables: ecosystem tests)."""
    h.run(["bash", "-n", os.path.join(prefix, "share/doc/collectived/deploy/slurm/"
                                              "train.sbatch")])
    try:
        import yaml
    except ImportError:
        log("python3-yaml missing: deploy/k8s/daemonset.yaml not parsed")
        return
    with open(os.path.join(prefix, "share/doc/collectived/deploy/k8s/daemonset.yaml")) as f:
        kinds = [doc["kind"] for doc in yaml.safe_load_all(f)]
    check(kinds == ["Namespace", "ConfigMap", "DaemonSet"], "daemonset.yaml kinds %s" % kinds)


TESTS = {name[len("test_"):]: fn for name, fn in globals().items() if name.startswith("test_")}


def parser():
    p = h.named_parser(__doc__, TESTS)
    p.add_argument("--ctl", help="collectivectl (unused here; the ops tests' arguments)")
    return p


if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), parser())
