#!/usr/bin/env python3
"""coll-train reports every bad input of its command line in one run (ctest -L ecosystem).

  - several bad values (--epochs -1 --lr abc --optimizer nope): exit 2, nothing on stdout, one
    line each on stderr, in the order given, each naming its option and value;
  - unknown options, an option missing its value, a value given to a flag and stray arguments
    are each named too, with one hint at --help after them;
  - options that cannot go together are all named as well (--service with several refused
    options, optimizer and schedule options that do not apply);
  - --help alone prints the help and exits 0; with a bad input beside it the run is a usage
    error (exit 2) that names the input.

Nothing here trains: the command line is refused before the data is read.
"""

import argparse
import subprocess
import sys
import unittest

TRAIN = None  # the coll-train binary (--train)


def run_train(args):
    """(exit status, stdout, stderr lines) of coll-train."""
    p = subprocess.run([TRAIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=30)
    return p.returncode, p.stdout, p.stderr.splitlines()


class CommandLine(unittest.TestCase):
    def assertRefused(self, args, expected):
        """Exit 2, empty stdout, and exactly the stderr lines that contain expected[i]."""
        status, out, err = run_train(args)
        self.assertEqual(status, 2, (args, out, err))
        self.assertEqual(out, "", args)
        self.assertEqual(len(err), len(expected), (args, err))
        for line, words in zip(err, expected):
            self.assertTrue(line.startswith("coll-train: "), line)
            self.assertIn(words, line)

    def test_every_bad_value(self):
        self.assertRefused(["--epochs", "-1", "--lr", "abc", "--optimizer", "nope"],
                           ["--epochs: '-1' is not an integer in [1, ",
                            "--lr: 'abc' is not a number in ",
                            "--optimizer: 'nope' is not one of sgd adamw lars lamb"])
        self.assertRefused(["--batch", "0", "--seed", "-3", "--hidden", "0", "--comm", "ring",
                            "--warmup", "5days", "--trust-clamp", "2"],
                           ["--batch: '0'", "--seed: '-3'", "--hidden: '0'", "--comm: 'ring'",
                            "--warmup: '5days'", "--trust-clamp: '2' is not MIN,MAX"])

    def test_unknown_options_and_arguments(self):
        self.assertRefused(["--bogus", "--epochs", "0", "--frob=3", "-x", "--service=1",
                            "stray", "--lr"],
                           ["'--bogus' is not an option", "--epochs: '0'",
                            "'--frob=3' is not an option", "'-x' is not an option",
                            "--service takes no value", "--lr needs a value",
                            "unexpected argument 'stray'", "try --help"])

    def test_every_conflict(self):
        self.assertRefused(["--service", "--pp", "2", "--comm", "after",
                            "--first-bucket-cap-mb", "2"],
                           ["--service cannot be used with --pp",
                            "--service cannot be used with --comm",
                            "--service cannot be used with --first-bucket-cap-mb"])
        self.assertRefused(["--tp", "2", "--service", "--dump-grads", "g"],
                           ["--service cannot be used with --tp",
                            "--service cannot be used with --dump-grads",
                            "--tp/--pp/--dp cannot be used with --dump-grads"])
        self.assertRefused(["--optimizer", "adamw", "--momentum", "0.5", "--lars-eta", "0.1",
                            "--gamma", "0.5"],
                           ["--momentum does not apply to --optimizer adamw",
                            "--lars-eta does not apply to --optimizer adamw",
                            "--gamma needs --decay step"])

    def test_help(self):
        status, out, err = run_train(["--help"])
        self.assertEqual((status, err), (0, []))
        self.assertIn("usage: coll-train", out)
        self.assertRefused(["--help", "--epochs", "x"], ["--epochs: 'x'"])


def main():
    global TRAIN
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="the coll-train binary")
    args, rest = p.parse_known_args()
    TRAIN = args.train
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
