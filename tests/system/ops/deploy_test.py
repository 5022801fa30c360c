#!/usr/bin/env python3
"""What a deployment of the daemon ships (ctest label ecosystem): `deploy_test.py NAME ...`.

  no_capabilities   two daemons run as an unprivileged user with an empty capability bounding
                    set (what the unit gives them) and serve a job of two nodes (the units'
                    own checks, systemd-analyze verify and security, are ops.systemd_units)
  k8s_example       the Kubernetes example publishes no host port, binds no listener to every
                    interface, gives the daemons a peer secret, and its configuration is one
                    the daemon accepts
  alert_rules       `promtool check rules` accepts the shipped alerting rules and
                    `promtool test rules` fires them on made-up series as expected
  process_metrics   /metrics has the standard process_* families, with the values /proc gives
"""

import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import Skip, check, log  # noqa: E402


def unprivileged(argv):
    """@argv as nobody:nogroup with no capability left to gain (setpriv, util-linux)."""
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"] + argv


def test_no_capabilities(args, work):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        raise Skip("needs root and setpriv to start daemons as another user")
    os.chmod(work, 0o755)
    shared = os.path.join(work, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)  # the daemons' directories, writable by nobody
    ds = []
    secret = h.node_secret(os.path.join(shared, "peer.secret"))
    os.chown(secret, 65534, 65534)  # the daemons' own, as the unit's --make-secret=USER does
    try:
        for k in range(2):
            os.mkdir(os.path.join(shared, "node%d" % k), 0o777)
            os.chmod(os.path.join(shared, "node%d" % k), 0o777)
            ds.append(h.Daemon(args.daemon, shared, "node%d" % k, secret=secret,
                               wrap=unprivileged([])).wait_ready())
        caps = open("/proc/%d/status" % ds[0].popen.pid).read()
        check(re.search(r"^CapBnd:\s+0+$", caps, re.M) and
              re.search(r"^Uid:\s+65534\s", caps, re.M), "the daemon is not capless nobody:\n"
              + caps)
        procs = []
        for r in range(4):
            env = dict(h.clean_env(), COLL_SOCKET=ds[r // 2].sock, COLL_JOB="nocap",
                       COLL_RANK=str(r), COLL_WORLD_SIZE="4", COLL_LOCAL_RANK=str(r % 2),
                       COLL_LOCAL_SIZE="2", COLL_ROOT=ds[0].addr, COLL_TIMEOUT_MS="30000")
            procs.append(h.Timed([args.rank, "--iters", "3", "--count", "100003"], env))
        for p in procs:
            check(p.wait(90) == 0, "a rank failed:\n%s\n%s" % (p.text(), ds[0].log()))
        for d in ds:
            h.check_no_warnings(d.log(), d.name)
    finally:
        for d in ds:
            d.kill()


# ---- k8s_example -------------------------------------------------------------------------------

def load_yaml(path):
    try:
        import yaml
    except ImportError:
        raise Skip("python3-yaml not found (run with Debian's /usr/bin/python3)")
    with open(path) as f:
        return list(yaml.safe_load_all(f))


def test_k8s_example(args, work):
    docs = load_yaml(os.path.join(args.source_dir, "deploy", "k8s", "daemonset.yaml"))
    conf = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["collectived.conf"]
    pod = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    box = pod["containers"][0]
    check(all("hostPort" not in p for p in box.get("ports", [])),
          "a port is published on every interface of the node: %s" % box["ports"])
    env = {e["name"]: e.get("value") for e in box.get("env", [])}
    # The values the pod would get on a node whose address is 10.0.0.5.
    env = {k: v.replace("$(HOST_IP)", "10.0.0.5") for k, v in env.items() if v is not None}
    for key in ("listen", "status_listen"):
        value = env.get("COLLD_" + key.upper()) or re.search(r"^\s*%s\s*=\s*(\S+)" % key, conf,
                                                             re.M)
        value = value if isinstance(value, str) else (value.group(1) if value else "")
        check(not re.match(r"(0\.0\.0\.0|\[::\]):", value),
              "%s binds every interface: %s" % (key, value))
    secrets_ = {v["name"] for v in pod["volumes"] if v.get("secret")}
    mounts = [m["mountPath"] for m in box["volumeMounts"] if m["name"] in secrets_]
    secret_file = re.search(r"^\s*peer_secret_file\s*=\s*(\S+)", conf, re.M)
    check(secret_file and any(secret_file.group(1).startswith(m.rstrip("/") + "/")
                              for m in mounts),
          "the node secret %s is not in a Secret volume (%s)"
          % (secret_file.group(1) if secret_file else None, mounts))
    path = os.path.join(work, "collectived.conf")
    with open(path, "w") as f:
        f.write(conf)
    daemon_env = dict(h.clean_env(), **{k: v for k, v in env.items()
                                       if k.startswith("COLLD_")})
    # The Secret's file is not here: one of the test's own stands in for it.
    secret = h.node_secret(os.path.join(work, "peer.secret"))
    rc, out = h.run([args.daemon, "--config", path, "--socket-group", "",
                     "--peer-secret-file", secret, "--print-config"], env=daemon_env,
                    check=False)
    check(rc == 0, "the daemon refuses the example's configuration:\n" + out)
    check("status_listen = 10.0.0.5:9464" in out and "listen = 10.0.0.5:29510" in out,
          "the listeners are not the node's address:\n" + out)


# ---- alert_rules -------------------------------------------------------------------------------

def test_alert_rules(args, work):
    if shutil.which("promtool") is None:
        raise Skip("promtool not found (Debian package prometheus)")
    deploy = os.path.join(args.source_dir, "deploy", "prometheus")
    h.run(["promtool", "check", "rules", os.path.join(deploy, "collectived-rules.yml")])
    # In place, from another directory: the test file finds the rules beside it.
    h.run(["promtool", "test", "rules", os.path.join(deploy, "collectived-rules_test.yml")],
          cwd=work)


# ---- process_metrics ---------------------------------------------------------------------------

def samples(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("process_"):
            name, value = line.split()
            out[name] = float(value)
    return out


def proc_facts(pid):
    """What /proc says about @pid, computed here: CPU s, start time, fds, fd limit, RSS."""
    tick = os.sysconf("SC_CLK_TCK")
    fields = open("/proc/%d/stat" % pid).read().rpartition(")")[2].split()
    btime = next(float(l.split()[1]) for l in open("/proc/stat") if l.startswith("btime "))
    limit = next(l.split()[3] for l in open("/proc/%d/limits" % pid)
                 if l.startswith("Max open files"))
    rss_kb = next(int(l.split()[1]) for l in open("/proc/%d/status" % pid)
                  if l.startswith("VmRSS:"))
    return {"cpu": (int(fields[11]) + int(fields[12])) / tick,
            "start": btime + int(fields[19]) / tick,
            "fds": len(os.listdir("/proc/%d/fd" % pid)), "max_fds": float(limit),
            "rss": rss_kb * 1024.0, "vsize": float(fields[20])}


def test_process_metrics(args, work):
    d = h.Daemon(args.daemon, work, "m").wait_ready()
    try:
        code, _, text = h.http_unix(d.status_sock, "/metrics")
        facts = proc_facts(d.popen.pid)
        check(code == 200, "GET /metrics: %d" % code)
        got = samples(text)
        log("process metrics %s; /proc %s" % (got, facts))
        for fam, kind in (("process_cpu_seconds_total", "counter"),
                          ("process_open_fds", "gauge"), ("process_max_fds", "gauge"),
                          ("process_resident_memory_bytes", "gauge"),
                          ("process_virtual_memory_bytes", "gauge"),
                          ("process_virtual_memory_max_bytes", "gauge"),
                          ("process_start_time_seconds", "gauge")):
            check("# TYPE %s %s\n" % (fam, kind) in text and fam in got,
                  "/metrics lacks %s (%s)" % (fam, kind))
        check(abs(got["process_start_time_seconds"] - facts["start"]) < 1.0, "start time")
        check(got["process_max_fds"] == facts["max_fds"], "max fds")
        check(abs(got["process_open_fds"] - facts["fds"]) <= 2, "open fds")
        check(0 <= facts["cpu"] - got["process_cpu_seconds_total"] < 1.0, "cpu seconds")
        check(0.5 < got["process_resident_memory_bytes"] / facts["rss"] < 2.0, "rss")
        check(0.5 < got["process_virtual_memory_bytes"] / facts["vsize"] < 2.0, "vsize")
        if shutil.which("promtool"):
            p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            check(p.returncode == 0, "promtool check metrics:\n" + p.stdout.decode())
    finally:
        d.kill()


TESTS = {name[len("test_"):]: fn for name, fn in globals().items() if name.startswith("test_")}

if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), h.named_parser(__doc__, TESTS))
