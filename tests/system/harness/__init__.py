"""The harness of the system tests (Python 3 standard library only): one module for every script
that starts daemons, built on collective-launch's own parts (tools/launch: how a child is
started so that it dies with its parent, how a daemon's control address is read).

A script puts tests/system on sys.path and imports it (`import harness as h`). Its parts:

  basics         TestFailure, Skip, check(), log(), wait_until(), run() (a bounded command),
                 clean_env() and launch_env(), check_no_warnings(), node secrets, and main(),
                 which runs a test and turns its outcome into the exit code ctest reads
                 (0 pass, 1 fail, SKIP = 77 skipped, saying why)
  cli            launch_parser() and named_parser(): the two command lines of the scripts
  launched       jobs run by collective-launch: launch(), the daemons' forwarded log lines,
                 coll-train's final line, the Fashion-MNIST data or a skip
  procs          Daemon (one collectived in a directory of its own), Rank, Timed (a process
                 whose output lines are timed)
  cluster        Cluster: daemons that outlive their jobs, jobs on any of them, faults; Job
  netns          Netns: network namespaces a test makes and deletes
  status_server  GET /status and /metrics on a status socket or over TCP
"""

import os
import sys

# collective-launch's package (tools/launch), which procs builds on.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tools"))

from .basics import (SANITIZE, SANITIZER_SLACK_S, SKIP, Skip, TestFailure, check,  # noqa: E402
                     check_no_warnings, clean_env, launch_env, log, main, node_secret, run,
                     wait_until, write_secret)
from .cli import launch_parser, named_parser  # noqa: E402
from .cluster import Cluster, Job  # noqa: E402
from .launched import (daemon_lines, dataset_or_skip, expect_fields, final_fields,  # noqa: E402
                       launch)
from .netns import Netns  # noqa: E402
from .procs import PYTHON, Daemon, Rank, Timed, parse_event, python_env  # noqa: E402
from .status_server import http_get, http_tcp, http_unix, parse_http, status_json  # noqa: E402

__all__ = ["SANITIZE", "SANITIZER_SLACK_S", "SKIP", "Skip", "TestFailure", "check",
           "check_no_warnings", "clean_env", "launch_env", "log", "main", "node_secret", "run",
           "wait_until", "write_secret", "launch_parser", "named_parser", "Cluster", "Job",
           "daemon_lines", "dataset_or_skip", "expect_fields", "final_fields", "launch", "Netns",
           "PYTHON", "Daemon", "Rank", "Timed", "parse_event", "python_env", "http_get",
           "http_tcp", "http_unix", "parse_http", "status_json"]
