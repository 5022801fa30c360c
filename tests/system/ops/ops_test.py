#!/usr/bin/env python3
"""Operations tests (ctest label ops): `ops_test.py NAME --daemon ... --rank ... --ctl ...`.

  config_cli         the configuration file through the daemon binary: precedence, the example
                     file, unknown keys warned, invalid values refused with key, value, file:line
  status_running     GET /status while a 2-node job runs: members with their pids, peers, pool;
                     `collectivectl status` shows its shared-memory and direct paths as /status
                     and the configuration have them (the root's direct bound, lowered by the
                     other node's pool)
  status_stalled     one rank holds back its allreduce (1 node x 2 ranks, then 2 x 2; 4 MiB
                     through the daemons, and 1 KiB in shared memory and the direct path):
                     /status and `collectivectl stalled` name it, its node and pid, and the
                     other nodes wait on its node
  metrics_promtool   GET /metrics (Unix socket and TCP) during and after a job: promtool check
                     metrics accepts it; counters, histograms, busbw and peer gauges add up
  collectivectl      every command, tables and --json, errors; a single-node job's paths
  shutdown           SIGTERM with an operation pending: the waiting rank gets a clear error, the
                     daemon exits 0 and removes its sockets, no shared memory is left behind
  sd_notify          READY=1, STATUS=, WATCHDOG=1 at half of WATCHDOG_USEC, STOPPING=1
  (systemd_units and install_pkgconfig: install_test.py)
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import Cluster, Daemon, Skip, TestFailure, check, log  # noqa: E402

COUNT_LARGE = 1 << 20  # float32 elements: 4 MiB, above busbw_min_bytes


def ctl(args, *cmd, check=True):
    """(exit code, stdout) of collectivectl."""
    return h.run([args.ctl] + list(cmd), timeout=30, check=check)


def ctl_json(args, *cmd):
    return json.loads(ctl(args, "--json", *cmd)[1])


# ---- config_cli --------------------------------------------------------------------------------

def daemon_cmd(args, *extra, env=None):
    return h.run([args.daemon] + list(extra), timeout=20, env=env, check=False)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def test_config_cli(args, work):
    conf = write(os.path.join(work, "c.conf"),
                 "# a comment\n[collectived]\npool_size = 32M\npipeline_depth = 8\n"
                 "socket = /tmp/from-file.sock\nlog_level = debug\nnot_a_key = 1\n")
    rc, out = daemon_cmd(args, "--config", conf, "--print-config")
    check(rc == 0, "--print-config with a file failed")
    for line in ("pool_size = 33554432  # file %s:3" % conf, "pipeline_depth = 8  # file %s:4" % conf,
                 "socket = /tmp/from-file.sock  # file %s:5" % conf,
                 "log_level = debug  # file %s:6" % conf, "segment_size = 262144  # default",
                 "status_socket = /tmp/status.sock  # default"):
        check(line in out, "missing from --print-config: %r" % line)
    check(re.search(r"warn core: %s:7: unknown key 'not_a_key'" % re.escape(conf), out),
          "no warning about the unknown key")
    # env over file, flag over env; COLL_LOG_LEVEL is read, COLLD_LOG_LEVEL wins over it.
    env = dict(h.clean_env(), COLLD_PIPELINE_DEPTH="16", COLLD_CONFIG=conf,
               COLL_LOG_LEVEL="trace", COLL_LOG_SUBSYS="job,status")
    rc, out = daemon_cmd(args, "--pool-size", "1M", "--print-config", env=env)
    for line in ("pipeline_depth = 16  # env", "pool_size = 1048576  # flag",
                 "log_level = trace  # env COLL_LOG_LEVEL", "log_subsys = job,status  # env COLL_LOG_SUBSYS",
                 "# configuration file: %s" % conf):
        check(line in out, "missing from --print-config: %r" % line)
    env["COLLD_LOG_LEVEL"] = "warn"
    rc, out = daemon_cmd(args, "--print-config", env=env)
    check("log_level = warn  # env\n" in out, "COLLD_LOG_LEVEL does not win over COLL_LOG_LEVEL")
    check_config_errors(args, work)
    check_cost_params_errors(args, work)
    check_example_file(args)


def check_cost_params_errors(args, work):
    """A cost_params file that cannot be used stops the daemon at start (exit 1, no socket
    left), with the file and line; a good one starts it."""
    cases = [
        ("alpha = 5e-5\ngamma = lots\n", "%s:2: gamma: \"lots\" is not a finite number >= 0"),
        ("speed = 3\n", "%s:1: unknown constant \"speed\""),
        ("knomial_radix = 1\n", "%s: the constants are not usable together"),
        (None, "%s: No such file or directory"),
    ]
    sock = os.path.join(work, "cost.sock")
    for i, (text, want) in enumerate(cases):
        path = os.path.join(work, "params%d.txt" % i)
        if text is not None:
            write(path, text)
        rc, out = daemon_cmd(args, "--socket", sock, "--status-socket", "none",
                             "--peer-secret-file", "", "--cost-params", path)
        check(rc == 1 and ("error core: cost_params: " + want % path) in out,
              "cost_params %r: exit code %d, expected 1 and %r in:\n%s" % (text, rc, want % path,
                                                                        out))
        check(not os.path.exists(sock), "a refused daemon left its socket %s" % sock)
    good = write(os.path.join(work, "params-good.txt"), "# bench/calibrate.sh\nalpha = 5e-5\n")
    rc, out = daemon_cmd(args, "--cost-params", good, "--print-config")
    check(rc == 0 and "cost_params = %s  # flag" % good in out, "cost_params not in --print-config")


def check_config_errors(args, work):
    cases = [
        ("[collectived]\npool_size = lots\n", "pool_size=lots (%s:2): not a size"),
        ("pipeline_depth = 4\nthis line is wrong\n", "%s:2: syntax error"),
        ("log_level = loud\n", "log_level=loud (%s:1): unknown log level"),
        ("pipeline_depth = -3\n", "pipeline_depth=-3 (%s:1): not a non-negative integer"),
        ("socket_group = no-such-group-here\n",
         "socket_group=no-such-group-here (file %s:1): no such group"),
        ("status_listen = somewhere\n", "status_listen=somewhere (file %s:1): not a numeric"),
        ("log_subsys = job,nothing\n", "log_subsys=job,nothing (file %s:1): unknown subsystem"),
        ("\ntimeout_ms = 5\n", "timeout_ms=5 (file %s:2): must be 100..86400000"),
    ]
    for i, (text, want) in enumerate(cases):
        path = write(os.path.join(work, "bad%d.conf" % i), text)
        rc, out = daemon_cmd(args, "--config", path, "--print-config")
        want = want % path if "%s" in want else want
        check(rc == 2, "invalid config %r: exit code %d, expected 2" % (text, rc))
        check(want in out, "invalid config %r: expected %r in:\n%s" % (text, want, out))
    rc, out = daemon_cmd(args, "--config", os.path.join(work, "missing.conf"), "--print-config")
    check(rc == 2 and "missing.conf: No such file or directory" in out,
          "a missing --config file is not refused")


def check_example_file(args):
    """The shipped example parses without a warning and mentions every key of the table."""
    example = os.path.join(args.source_dir, "deploy", "collectived.conf.example")
    rc, out = daemon_cmd(args, "--config", example, "--print-config")
    check(rc == 0, "the example configuration is refused")
    h.check_no_warnings(out, "the example configuration")
    text = open(example).read()
    for key in re.findall(r"^(\w+) = ", out, re.M):
        check(re.search(r"^#?%s =" % key, text, re.M), "example config lacks key %s" % key)


# ---- status_running ----------------------------------------------------------------------------

def wait_files(prefix, ranks, timeout=30):
    h.wait_until(lambda: all(os.path.exists("%s.%d" % (prefix, r)) for r in ranks), timeout,
                 "every rank to join")


def job_of(doc, job_id):
    jobs = [j for j in doc["jobs"] if j["id"] == job_id]
    check(len(jobs) == 1, "job %s not in /status: %s" % (job_id, json.dumps(doc)[:2000]))
    return jobs[0]


def check_running_job(doc, cluster, k, per_node):
    job = job_of(doc, "running")
    check(job["state"] == "ready", "job state %s" % job["state"])
    check((job["world_size"], job["local_size"], job["joined"], job["nodes"], job["node_rank"])
          == (4, per_node, per_node, 2, k), "job shape: %s" % job)
    check(job["epoch"] > 0, "epoch %r (the root sets it at the rendezvous)" % job["epoch"])
    check(job["root"] == cluster.daemons[0].addr, "root %s, expected node 0" % job["root"])
    check(job["timeout_ms"] > 0, "timeout_ms %r" % job["timeout_ms"])
    mine = [r for r in cluster.ranks if r.node == k]
    for m, r in zip(job["members"], mine):
        check((m["rank"], m["local_rank"], m["pid"], m["uid"]) == (r.rank, r.local, r.pid,
                                                                   os.getuid()),
              "member %s, expected rank %d local %d pid %d" % (m, r.rank, r.local, r.pid))
    peers = {p["node"]: p for p in job["peers"]}
    check(peers[k]["state"] == "self" and peers[1 - k]["state"] == "up",
          "peers: %s" % job["peers"])
    check(peers[1 - k]["ranks"] == [2 * (1 - k), 2 * (1 - k) + 1], "peer ranks: %s" % peers)
    check(job["pool"]["used_bytes"] >= COUNT_LARGE // 4 and job["pool"]["bytes"] > 0,
          "pool: %s" % job["pool"])
    check(job["pool"]["on_demand"] is True, "the default pool is not on demand: %s" % job["pool"])
    check(doc["node"]["sessions"] == per_node and doc["uptime_s"] > 0, "node: %s" % doc["node"])
    check_algo_choice(job)


# The root's (node 0's) cost model constants in test_status_running; node 1 has none of its
# own (cost_params = none) and must still show and use the root's ranges.
COST_PARAMS = "# bench/calibrate.sh\nalpha = 10e-6\ngamma = 3e-9\n"


def check_algo_choice(job):
    """The root's cost-model ranges of a 2-node job with COST_PARAMS: recursive doubling wins
    while alpha + S (beta + gamma) < 2 alpha + S beta + S gamma / 2, below 2 alpha / gamma =
    6666.7 bytes; the ring above."""
    choice = job["algo_choice"]
    ranges = [(r["collective"], r["algo"], r["max_bytes"]) for r in choice["ranges"]]
    check(choice["by"] == "cost_model" and ranges[:2] == [("allreduce", "rd", 6666),
                                                          ("allreduce", "ring", None)]
          and ("broadcast", "chain", None) in ranges, "algo_choice: %s" % choice)


# The direct path in test_status_running: the root's (node 0's) direct_max_bytes holds for the
# job, not node 1's, and node 1's smaller pool (pool_max) lowers it: 12 MiB / 8 / 64 posts
# leaves room for 24 KiB buffers, the power of two below is 16 KiB.
DIRECT_ROOT, DIRECT_OTHER, POOL_MAX_OTHER = 32 << 10, 8 << 10, 12 << 20


def direct_cap(pool_bytes):
    """The largest power of two whose 64 node buffers take at most an eighth of @pool_bytes
    (the direct path's buffers, one per post of local rank 0's ring), 0 below 64."""
    room, cap = pool_bytes // 8 // 64, 64
    if room < cap:
        return 0
    while cap * 2 <= room:
        cap *= 2
    return cap


def node_args_running(params):
    """Node 0 (the root) has the cost model and the larger direct bound; node 1 neither, and a
    smaller pool."""
    return lambda k: (["--cost-params", params, "--direct-max-bytes", str(DIRECT_ROOT)] if k == 0
                      else ["--cost-params", "none", "--direct-max-bytes", str(DIRECT_OTHER),
                            "--pool-max", str(POOL_MAX_OTHER)])


def check_paths_text(args, cluster):
    """`collectivectl status` on each node of the running 2 x 2 job: its shared-memory line and
    its direct path's bound and leader, as /status has them and as the configuration makes them
    (the posted counts between two /status documents taken around it)."""
    docs = [h.status_json(d.status_sock) for d in cluster.daemons]
    expected = min(DIRECT_ROOT, direct_cap(min(job_of(doc, "running")["pool"]["bytes"]
                                                for doc in docs)))
    check(expected == 16 << 10, "the direct bound from the configuration: %d" % expected)
    for k, (d, before) in enumerate(zip(cluster.daemons, docs)):
        _, text = ctl(args, "--socket", d.status_sock, "status")
        shm = job_of(before, "running")["shm"]
        after = job_of(h.status_json(d.status_sock), "running")["shm"]
        address = shm["leader_address"]
        check(shm["direct_max_bytes"] == expected and isinstance(address, str) and
              len(address) > 0 and after["leader_address"] == address,
              "node %d: /status shm: %s, expected direct_max_bytes %d" % (k, shm, expected))
        line = ("  job running: direct: allreduces up to %.1f KiB between the nodes' leaders "
                "(here rank %d, UCX address %d bytes)" % (expected / 1024, 2 * k,
                                                          len(address) // 2))
        check(line in text.splitlines(), "node %d: status lacks %r:\n%s" % (k, line, text))
        m = re.search(r"^  job running: shm: allreduces up to %.1f KiB reduced on each node for "
                      r"the daemons; (\d+) of (\d+) posted completed there$" %
                      (shm["node_max_bytes"] / 1024), text, re.M)
        check(m and shm["operations"] <= int(m.group(1)) <= after["operations"] and
              shm["posted"] <= int(m.group(2)) <= after["posted"],
              "node %d: status's shm line against /status %s .. %s:\n%s" % (k, shm, after, text))


def start_job(args, cluster, name, per_node, rank_args):
    """Job @name of ops_rank processes (@rank_args), @per_node on every daemon of @cluster."""
    return cluster.start_job(name, list(range(len(cluster.daemons))), per_node,
                             [args.rank] + rank_args, timeout_ms=30000, token=None)


def test_status_running(args, work):
    cluster = Cluster(args.daemon, "ops")
    params = write(os.path.join(work, "params.txt"), COST_PARAMS)
    try:
        cluster.start_daemons(2, node_args=node_args_running(params))
        job = start_job(args, cluster, "running", 2, ["--iters", "60", "--sleep-ms", "50",
                                                      "--count", str(COUNT_LARGE // 4),
                                                      "--ready-file", os.path.join(work, "ready")])
        wait_files(os.path.join(work, "ready"), range(4))
        time.sleep(0.3)
        for k, d in enumerate(cluster.daemons):
            doc = h.status_json(d.status_sock)
            check(doc["version"] and doc["node"]["control_addr"] == d.addr, "node: %s" % doc)
            check_running_job(doc, cluster, k, 2)
        _, text = ctl(args, "--socket", cluster.daemons[1].status_sock, "jobs")
        check("automatic choice (cost model): allreduce rd <= 6666 B, ring;" in text,
              "collectivectl jobs does not show the ranges:\n%s" % text)
        check_paths_text(args, cluster)
        job.wait_exit(120, expect=0)
        for d in cluster.daemons:
            h.wait_until(lambda: not h.status_json(d.status_sock)["jobs"], 10,
                         "the job to close on %s" % d.name)
        for d in cluster.daemons:
            h.check_no_warnings(d.log(), d.name)
    finally:
        cluster.close()


# ---- status_stalled ----------------------------------------------------------------------------

def stalled_ops(args, cluster, older_ms):
    cmd = []
    for d in cluster.daemons:
        cmd += ["--socket", d.status_sock]
    return ctl_json(args, *(cmd + ["stalled", "--older-than", str(older_ms)]))


def check_stall(args, cluster, stalled, path):
    nodes = len(cluster.daemons)
    found = h.wait_until(lambda: (lambda f: f if len(f) == nodes else None)(
        stalled_ops(args, cluster, 300)), 30, "an operation older than 300 ms on every daemon")
    by_state = {}
    for op in found:
        by_state.setdefault(op["state"], []).append(op)
    queued = by_state.get("queued", [])
    check(len(queued) == 1, "expected one queued operation: %s" % found)
    missing = queued[0]["missing_ranks"]
    check([m["rank"] for m in missing] == [stalled.rank] and missing[0]["pid"] == stalled.pid
          and missing[0]["node"] == stalled.node, "missing ranks %s, expected rank %d pid %d"
          % (missing, stalled.rank, stalled.pid))
    check(queued[0]["collective"] == "allreduce" and queued[0]["age_ms"] >= 300,
          "queued operation: %s" % queued[0])
    check(all(op["path"] == path for op in found), "expected path %s: %s" % (path, found))
    for op in by_state.get("running", []):
        check([n["node"] for n in op.get("waiting_on_nodes", [])] == [stalled.node],
              "a running operation waits on %s, expected node %d" % (op.get("waiting_on_nodes"),
                                                                  stalled.node))
    cmd = sum((["--socket", d.status_sock] for d in cluster.daemons), [])
    _, table = ctl(args, *(cmd + ["stalled", "--older-than", "300"]))
    check("missing rank %d (node %d, %s, pid %d)" % (stalled.rank, stalled.node,
                                                    socket.gethostname(), stalled.pid) in table,
          "collectivectl stalled does not name rank %d" % stalled.rank)
    waiting = "waiting on node %d (%s)" % (stalled.node, socket.gethostname())
    check(len(by_state.get("running", [])) == nodes - 1 and table.count(waiting) == nodes - 1,
          "collectivectl stalled does not show the other nodes %s:\n%s" % (waiting, table))
    names = {row.split()[0] for row in table.splitlines()[1:] if row.strip()}
    check(len(names) == nodes, "collectivectl stalled's DAEMON column does not tell the %d "
          "daemons of this host apart:\n%s" % (nodes, table))
    _, none = ctl(args, *(cmd + ["stalled", "--older-than", "3600000"]))
    check("no operation pending" in none, "a 1 h threshold still lists operations")


def stall_run(args, work, nodes, per_node, count, path):
    """Rank nodes x per_node - 1 holds back an allreduce of @count floats, which waits on @path
    ("daemon", or "shm": in the shared-memory area, and between nodes the direct path)."""
    sub = os.path.join(work, "%dx%d-%d" % (nodes, per_node, count))
    os.mkdir(sub)
    release = os.path.join(sub, "release")
    cluster = Cluster(args.daemon, "ops")
    try:
        cluster.start_daemons(nodes)
        last = nodes * per_node - 1
        job = start_job(args, cluster, "stall", per_node,
                        ["--count", str(count), "--stall-rank", str(last), "--release-file",
                         release, "--ready-file",
                         os.path.join(sub, "ready")])
        wait_files(os.path.join(sub, "ready"), range(nodes * per_node))
        check_stall(args, cluster, cluster.ranks[last], path)
        open(release, "w").close()
        job.wait_exit(60, expect=0)
        check(not stalled_ops(args, cluster, 0), "operations left after the release")
        for d in cluster.daemons:
            h.check_no_warnings(d.log(), d.name)
    finally:
        cluster.close()


def test_status_stalled(args, work):
    stall_run(args, work, 1, 2, 1 << 20, "daemon")
    stall_run(args, work, 2, 2, 1 << 20, "daemon")
    stall_run(args, work, 2, 2, 256, "shm")


# ---- metrics_promtool --------------------------------------------------------------------------

def promtool_check(text, what):
    if shutil.which("promtool") is None:
        raise Skip("promtool not found (Debian package prometheus)")
    p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0 or out.strip():
        raise TestFailure("promtool check metrics rejects %s:\n%s" % (what, out))
    log("promtool check metrics accepts %s (%d lines)" % (what, len(text.splitlines())))


def samples(text):
    """{(name, frozenset(labels)): value}"""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
            check(m, "malformed sample line %r" % line)
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(s, name, **labels):
    key = (name, frozenset(labels.items()))
    check(key in s, "no sample %s%s" % (name, labels))
    return s[key]


def test_metrics_promtool(args, work):
    if shutil.which("promtool") is None:
        raise Skip("promtool not found (Debian package prometheus)")
    iters = 20
    cluster = Cluster(args.daemon, "ops")
    try:
        cluster.start_daemons(2, args=["--status-listen", "127.0.0.1:0"])
        job = start_job(args, cluster, "metrics", 1, ["--iters", str(iters), "--sleep-ms", "100",
                                                      "--count", str(COUNT_LARGE), "--ready-file",
                                                      os.path.join(work, "ready")])
        wait_files(os.path.join(work, "ready"), range(2))
        time.sleep(0.5)
        code, headers, text = h.http_unix(cluster.daemons[0].status_sock, "/metrics")
        check(code == 200 and headers["content-type"].startswith("text/plain; version=0.0.4"),
              "GET /metrics: %d %s" % (code, headers))
        promtool_check(text, "/metrics while a job runs")
        s = samples(text)
        check(metric(s, "collectived_peer_up", job_id="metrics", node="1",
                     host=socket.gethostname()) == 1, "peer not up")
        check(metric(s, "collectived_pool_bytes", job_id="metrics") > 0, "no pool bytes")
        check(metric(s, "collectived_jobs", state="ready") == 1, "no ready job")
        job.wait_exit(120, expect=0)
        for d in cluster.daemons:
            check_final_metrics(d, iters)
    finally:
        cluster.close()


def check_final_metrics(d, iters):
    tcp = h.status_json(d.status_sock)["node"]["status_listen"]
    check(re.match(r"^127\.0\.0\.1:\d+$", tcp), "status_listen %r" % tcp)
    code, _, text = h.http_tcp(tcp, "/metrics")
    check(code == 200, "GET /metrics over TCP: %d" % code)
    promtool_check(text, "/metrics of %s over TCP after the job" % d.name)
    s = samples(text)
    lbl = dict(collective="allreduce", dtype="float32", compression="none")
    check(metric(s, "collectived_operations_total", **lbl) == iters, "operations_total")
    check(metric(s, "collectived_operation_bytes_total", **lbl) == iters * COUNT_LARGE * 4,
          "operation_bytes_total")
    check(metric(s, "collectived_operation_failures_total", **lbl) == 0, "failures")
    check(metric(s, "collectived_operation_duration_seconds_count", collective="allreduce")
          == iters, "duration histogram count")
    check(metric(s, "collectived_operation_duration_seconds_bucket", collective="allreduce",
                 le="+Inf") == iters, "duration +Inf bucket")
    ll = dict(collective="allreduce", dtype="float32", world_size="2")
    bus = metric(s, "collectived_last_large_operation_busbw_bytes_per_second", **ll)
    alg = metric(s, "collectived_last_large_operation_algbw_bytes_per_second", **ll)
    check(bus > 0 and abs(bus - alg) < 1e-6 * alg, "busbw %g != algbw %g * 2(n-1)/n" % (bus, alg))
    check(metric(s, "collectived_last_large_operation_bytes", **ll) == COUNT_LARGE * 4, "bytes")
    check(metric(s, "collectived_errors_total", kind="COLL_ERR_MISMATCH") == 0, "errors")
    check(metric(s, "collectived_jobs_created_total") == 1, "jobs created")


# ---- collectivectl -----------------------------------------------------------------------------

def test_collectivectl(args, work):
    release = os.path.join(work, "release")
    cluster = Cluster(args.daemon, "ops")
    try:
        d = cluster.start_daemons(1, args=["--status-listen", "127.0.0.1:0"])[0]
        job = start_job(args, cluster, "ctl", 2, ["--stall-rank", "1", "--release-file", release,
                                                  "--ready-file", os.path.join(work, "ready"),
                                                  "--count", "1000"])
        wait_files(os.path.join(work, "ready"), range(2))
        time.sleep(0.3)
        check_ctl_tables(args, d, cluster)
        check_ctl_json(args, d, cluster)
        open(release, "w").close()
        job.wait_exit(60, expect=0)
    finally:
        cluster.close()
    rc, out = ctl(args, "--socket", os.path.join(work, "nothing.sock"), "status", check=False)
    check(rc == 1 and "nothing.sock" in out, "an absent socket: exit %d, %r" % (rc, out))
    rc, out = ctl(args, "--help")
    check("stalled" in out and "--json" in out, "--help lacks the commands")
    rc, out = ctl(args, "frobnicate", check=False)
    check(rc == 2, "an unknown command: exit %d" % rc)
    for bad in ("-1", "0", "soon"):
        rc, out = ctl(args, "--timeout", bad, "status", check=False)
        check(rc == 2 and "above 0" in out and "Traceback" not in out,
              "--timeout %s: exit %d, %r" % (bad, rc, out))


def check_ctl_tables(args, d, cluster):
    s = ["--socket", d.status_sock]
    _, out = ctl(args, *s, "status")
    check(re.search(r"^ctl\s+ready\s+2/2\s+2\s+1\s+1\s", out, re.M), "status table:\n" + out)
    shm = h.status_json(d.status_sock)["jobs"][0]["shm"]
    check(shm["direct_max_bytes"] == 0 and shm["leader_address"] is None,
          "a single-node job has no direct path: /status shm %s" % shm)
    for line in ("  job ctl: shm: collectives up to %.1f MiB among the local ranks; %d of %d "
                 "posted completed there" % (shm["max_bytes"] / (1 << 20), shm["operations"],
                                             shm["posted"]),
                 "  job ctl: direct: off (one node)"):
        check(line in out.splitlines(), "status lacks %r:\n%s" % (line, out))
    _, out = ctl(args, *s, "jobs")
    for r in cluster.ranks:
        check(re.search(r"^\s*%d\s+%d\s+%d\s+%d\s+yes$" % (r.rank, r.local, r.pid, os.getuid()),
                        out, re.M), "jobs table lacks rank %d:\n%s" % (r.rank, out))
    check("missing rank 1" in out, "jobs table does not name the missing rank")
    # The stalled allreduce waits in shared memory (1 node): its algorithm is the local ranks'.
    op = h.status_json(d.status_sock)["jobs"][0]["operations"][0]
    algo = op.get("algo") or ("shm" if op["path"] == "shm" else "-")
    check(algo == "shm" and "ALGORITHM" in out and
          re.search(r"^allreduce #0\s+queued\s+shm\s", out, re.M),
          "jobs table lacks the algorithm %r of /status:\n%s" % (algo, out))
    _, out = ctl(args, *s, "peers")
    check(re.search(r"^ctl\s+0\s+\S+\s+0,1\s+self", out, re.M), "peers table:\n" + out)
    _, out = ctl(args, *s, "metrics")
    check("collectived_jobs{state=\"ready\"} 1" in out, "metrics text")
    tcp = h.status_json(d.status_sock)["node"]["status_listen"]
    _, out = ctl(args, "--connect", tcp, "stalled", "--older-than", "100")
    check("missing rank 1" in out, "stalled over TCP:\n" + out)


def check_ctl_json(args, d, cluster):
    s = ["--socket", d.status_sock]
    docs = ctl_json(args, *s, "status")
    check(docs[0]["jobs"][0]["id"] == "ctl", "status --json")
    jobs = ctl_json(args, *s, "jobs")
    check([m["pid"] for m in jobs[0]["jobs"][0]["members"]] == [r.pid for r in cluster.ranks],
          "jobs --json pids")
    peers = ctl_json(args, *s, "peers")
    check(peers[0]["state"] == "self" and peers[0]["job"] == "ctl", "peers --json: %s" % peers)
    m = ctl_json(args, *s, "metrics")[0]["samples"]
    check(any(x["name"] == "collectived_sessions" and x["value"] == 2 for x in m),
          "metrics --json: no collectived_sessions 2")
    st = json.loads(ctl(args, *s, "stalled", "--older-than", "100", "--json")[1])
    check(len(st) == 1 and st[0]["missing_ranks"][0]["rank"] == 1, "stalled --json: %s" % st)


# ---- shutdown ----------------------------------------------------------------------------------

def shm_files():
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def test_shutdown(args, work):
    before = shm_files()
    release = os.path.join(work, "release")
    cluster = Cluster(args.daemon, "ops")
    try:
        d = cluster.start_daemons(1)[0]
        start_job(args, cluster, "bye", 2, ["--stall-rank", "1", "--release-file", release,
                                            "--ready-file", os.path.join(work, "ready"),
                                            "--expect-error", "shutting down"])
        wait_files(os.path.join(work, "ready"), range(2))
        h.wait_until(lambda: job_of(h.status_json(d.status_sock), "bye")["operations"], 20,
                     "rank 0's allreduce to be pending")
        rc = d.stop(20)
        check(rc == 0, "collectived exited with %d after SIGTERM:\n%s" % (rc, d.log()))
        r0 = cluster.ranks[0]
        check(r0.wait(20) == 0, "rank 0 did not get the shutdown error:\n" + r0.text())
        log("rank 0: %s" % r0.text().strip())
        for path in (d.sock, d.status_sock, d.addr_file):
            check(not os.path.exists(path), "%s left behind after shutdown" % path)
        check("signal 15: shutting down" in d.log(), "no shutdown line in the log")
        left = shm_files() - before
        check(not left, "shared memory left in /dev/shm: %s" % sorted(left))
    finally:
        open(release, "w").close()
        cluster.close()


# ---- sd_notify ---------------------------------------------------------------------------------

def test_sd_notify(args, work):
    path = os.path.join(work, "notify.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path)
    srv.settimeout(10)
    env = dict(h.clean_env(), NOTIFY_SOCKET=path, WATCHDOG_USEC="200000")
    d = Daemon(args.daemon, work, "node0", env=env)
    msgs = []
    try:
        def recv():
            m = srv.recv(4096).decode()
            log("notify: %r" % m)
            msgs.append(m)
            return m
        first = recv()
        check("READY=1" in first and "STATUS=0 jobs (0 ready), 0 ranks" in first,
              "first notification %r" % first)
        check(os.path.exists(d.status_sock), "READY=1 before the status socket exists")
        start = time.monotonic()
        pings = 0
        while pings < 5:
            pings += "WATCHDOG=1" in recv()
        elapsed = time.monotonic() - start
        check(elapsed < 2.0, "5 watchdog pings took %.2f s (expected every 0.1 s)" % elapsed)
        d.popen.send_signal(signal.SIGTERM)
        while "STOPPING=1" not in recv():
            pass
        # No second signal: after the first, SIGTERM has its default action again.
        rc = d.popen.wait(20)
        check(rc == 0, "daemon exit code %d:\n%s" % (rc, d.log()))
    finally:
        srv.close()
        d.kill()


TESTS = {name[len("test_"):]: fn for name, fn in globals().items() if name.startswith("test_")}


def parser():
    p = h.named_parser(__doc__, TESTS)
    p.add_argument("--ctl", required=True, help="collectivectl")
    return p


if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), parser())
