#!/usr/bin/env python3
"""Malformed frames: runs malformed_frames (1 node, 2 ranks) under the launcher. The program
checks the behaviour (each bad connection is closed, the job's allreduces stay correct); this
script checks that the daemon said why: each connection rank 0 opened is closed with a reason
that names its fault, in the order of the attacks, and no warning or error was logged about
anything else."""

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness  # noqa: E402
from harness import TestFailure  # noqa: E402

# Close reason expected in the daemon's log for each connection of the attacker, in order
# (malformed_frames.c, attacks[]). The control connection closes because the client left.
EXPECTED = [
    ("hello", r"disconnect"),
    ("oversize", r"malformed.*(too large|larger than)|(too large|larger than).*malformed"),
    ("garbage", r"malformed.*(undecodable|decode)"),
    ("bad-version", r"version 77"),
    ("submit-first", r"Hello"),
    ("hello-oversize", r"malformed.*(too large|larger than)|(too large|larger than).*malformed"),
]
PID_LINE = re.compile(r"^\[r0\] malformed_frames: attacker pid (\d+)")
SESSION = re.compile(r"^session (\d+) \(pid (\d+)(, job [^)]*)?\)(:| closed:) (.*)$")


def attacker_pid(lines):
    for line in lines:
        m = PID_LINE.match(line)
        if m:
            return m.group(1)
    raise TestFailure("rank 0 did not print its pid")


def raw_sessions(lines, pid):
    """{session id: [texts]} of the daemon's session lines about connections of @pid that
    never joined the job, in the order the sessions first appear."""
    sessions = {}
    for node, level, subsys, text in harness.daemon_lines(lines):
        m = SESSION.match(text) if subsys == "session" else None
        if m and m.group(2) == pid and not m.group(3):
            sessions.setdefault(int(m.group(1)), []).append("%s %s" % (level, m.group(5)))
    return [sessions[k] for k in sorted(sessions)]


def check_reasons(sessions):
    if len(sessions) != len(EXPECTED):
        raise TestFailure("expected %d raw connections in the daemon log, found %d: %r"
                          % (len(EXPECTED), len(sessions), sessions))
    for (name, pattern), texts in zip(EXPECTED, sessions):
        if not any(re.search(pattern, t) for t in texts):
            raise TestFailure("attack %s: no daemon line matching /%s/ among %r"
                              % (name, pattern, texts))
        harness.log("attack %s: daemon said: %s" % (name, " | ".join(texts)))


def body(args):
    rc, lines = harness.launch(args, 1, 2, [args.program])
    if rc != 0:
        raise TestFailure("collective-launch exited with %d" % rc)
    pid = attacker_pid(lines)
    check_reasons(raw_sessions(lines, pid))
    # Errors about the attacker's raw connections are expected; nothing else may complain.
    raw = re.compile(r"session \d+ \(pid %s\)" % pid)
    harness.check_no_warnings(lines, allowed=(raw,))


def main():
    p = harness.launch_parser(__doc__.splitlines()[0])
    p.add_argument("--program", required=True, help="the malformed_frames binary")
    args = p.parse_args()
    harness.main(lambda: body(args))


if __name__ == "__main__":
    main()
