"""The two command lines of the test scripts: a script that runs jobs under collective-launch,
and a script of named tests that starts daemons and ranks itself."""

import argparse


def launch_parser(description):
    """--launcher, --daemon and --timeout (a bound on each command, default 120 s)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--launcher", required=True, help="collective-launch")
    p.add_argument("--daemon", required=True, help="collectived binary")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="bound on each command in seconds (default 120)")
    return p


def named_parser(doc, tests):
    """The test's name (one of @tests), the build's programs and directories."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("test", choices=sorted(tests))
    p.add_argument("--daemon", required=True)
    p.add_argument("--rank", required=True, help="ops_rank binary")
    p.add_argument("--source-dir", required=True)
    p.add_argument("--build-dir", required=True)
    p.add_argument("--sanitize", default="",
                   help="the build's COLL_SANITIZE: programs built here against it need it too")
    return p
