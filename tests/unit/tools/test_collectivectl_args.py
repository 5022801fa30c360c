#!/usr/bin/env python3
"""collectivectl names every unusable value of its command line in one run (ctest -L ecosystem).

argparse stops at the first error it finds itself (an unknown option or command); the values it
takes as text and collectivectl checks (--timeout, --older-than, every --connect) are checked
together: exit 2, the usage line, then one line per bad value naming its option, in the order
--timeout, --connect, --older-than; nothing asked of any daemon. Good values pass these checks
and reach the daemon (here: none, exit 1 naming the socket).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import unittest

CTL = None  # the collectivectl script (--ctl)


def run_ctl(args):
    """(exit status, stdout, stderr lines) of collectivectl."""
    p = subprocess.run([CTL] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=30)
    return p.returncode, p.stdout, p.stderr.splitlines()


class Values(unittest.TestCase):
    def assertRefused(self, args, expected):
        status, out, err = run_ctl(args)
        self.assertEqual(status, 2, (args, out, err))
        self.assertEqual(out, "")
        errors = [line for line in err if line.startswith("collectivectl: error: ")]
        self.assertEqual(len(errors), len(expected), err)
        for line, words in zip(errors, expected):
            self.assertIn(words, line)
        self.assertFalse(any("Traceback" in line for line in err), err)

    def test_every_bad_value(self):
        self.assertRefused(["--timeout", "0", "--connect", "nohost", "--connect", "h:99999",
                            "stalled", "--older-than", "-1"],
                           ["--timeout '0' is not a number of seconds above 0",
                            "--connect nohost: expected HOST:PORT",
                            "--connect h:99999: expected HOST:PORT",
                            "--older-than '-1' is not a number of milliseconds"])
        self.assertRefused(["--timeout", "nan", "stalled", "--older-than", "soon"],
                           ["--timeout 'nan'", "--older-than 'soon'"])

    def test_good_values_reach_the_daemon(self):
        with tempfile.TemporaryDirectory(prefix="collectivectl-args-") as tmp:
            sock = os.path.join(tmp, "none.sock")
            status, out, err = run_ctl(["--socket", sock, "--timeout", "0.5", "stalled",
                                        "--older-than", "0"])
        self.assertEqual(status, 1, err)
        self.assertEqual(len(err), 1, err)
        self.assertIn(sock, err[0])


def main():
    global CTL
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ctl", required=True, help="the collectivectl script")
    args, rest = p.parse_known_args()
    CTL = args.ctl
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
