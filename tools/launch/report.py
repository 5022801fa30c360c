"""What the launcher itself says: its name, its messages on stderr, a failure of the launch, and
the exit statuses it chooses (a failed trainer's own code is in children.exit_code_of)."""

import sys

PROG = "collective-launch"

EXIT_ERROR = 1
EXIT_TIMEOUT = 124


class LaunchError(Exception):
    """A failure of the launch itself (daemon not found or not starting); exit status 1."""


def log(msg):
    """The launcher's own messages go to stderr with its name."""
    try:
        sys.stderr.write("%s: %s\n" % (PROG, msg))
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        pass
