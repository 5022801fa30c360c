"""Shared helpers of the Python package's tests (standard library only).

Tests skip with exit code 77 (ctest's SKIP_RETURN_CODE here) and a line that says why.
"""

import importlib
import os
import sys
import unittest

SKIP = 77


def log(msg):
    print("%s: %s" % (os.path.basename(sys.argv[0]), msg), flush=True)


def skip(reason):
    """Exit with SKIP, saying why."""
    log("SKIP: " + reason)
    sys.exit(SKIP)


def require(name, package=None):
    """Import module @name or skip the test (naming the Debian package to install)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        skip("%s cannot be imported by %s (%s); install Debian's %s and run with /usr/bin/python3"
             % (name, sys.executable, e, package or "python3-" + name))


def optional(name):
    """Module @name, or None when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def run_tests(module_name):
    """Run the unittest cases of @module_name; returns the exit status (0 or 1)."""
    module = sys.modules[module_name]
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1
