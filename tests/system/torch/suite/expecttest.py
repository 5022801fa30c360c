"""A stand-in for the expecttest package (PyPI; Debian has none), which torch's test harness
imports (torch/testing/_internal/common_utils.py): its TestCase base and its ACCEPT flag.

Only assertExpectedInline would need the real package, and no distributed test calls it: here
it skips the test, saying why, rather than pass it unchecked.
"""

import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    """expecttest.TestCase without the expected-output assertions."""

    def assertExpectedInline(self, actual, expect, skip=0):
        raise unittest.SkipTest("assertExpectedInline needs the expecttest package")
