"""The launcher's children: a daemon or trainer process in its own process group, its output pipes
split into prefixed lines, and what it does before exec so that it dies with the launcher."""

import os
import signal
import sys

try:
    import ctypes
except ImportError:  # a Python built without libffi: no parent-death signal, all else works
    ctypes = None

MAX_LINE = 1 << 20  # a "line" this long without a newline is forwarded as it is
PR_SET_PDEATHSIG = 1
# Output lines with a known cause, and what the launcher says when the process fails.
HINTS = {
    b"Invalid backend: 'collectived'":
        "torch.distributed does not know the backend 'collectived' in that process: the "
        "package's collective-torch.pth registers it only from a site directory, and a "
        "PYTHONPATH entry is not one; add 'import collective' to the script, or install the "
        "package where python3 looks for it (README: the collectived torch.distributed backend)",
}


def describe_status(returncode):
    """'exited with code 3' or 'was killed by signal 9 (SIGKILL)' for a Popen return code."""
    if returncode >= 0:
        return "exited with code %d" % returncode
    sig = -returncode
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = "unknown"
    return "was killed by signal %d (%s)" % (sig, name)


def exit_code_of(returncode):
    """Shell convention: a process killed by signal S counts as 128+S."""
    return returncode if returncode >= 0 else 128 - returncode


class Sink:
    """One of the launcher's output files; writes whole lines only, and survives a closed pipe."""

    def __init__(self, f):
        self.f = f
        self.broken = False

    def write(self, data):
        if self.broken:
            return
        try:
            self.f.write(data)
            self.f.flush()
        except (BrokenPipeError, OSError):
            self.broken = True


class Stream:
    """One pipe of a child: splits what arrives into lines and forwards each with a prefix."""

    def __init__(self, pipe, prefix, sink):
        self.pipe = pipe
        self.fd = pipe.fileno()
        self.prefix = prefix.encode()
        self.sink = sink
        self.buf = bytearray()
        self.closed = False
        self.hints = []  # the HINTS of lines seen, each once

    def feed(self, data):
        self.buf += data
        while True:
            nl = self.buf.find(b"\n")
            if nl < 0:
                break
            line = bytes(self.buf[: nl + 1])
            self.hints += [h for p, h in HINTS.items() if p in line and h not in self.hints]
            self.sink.write(self.prefix + line)
            del self.buf[: nl + 1]
        if len(self.buf) >= MAX_LINE:
            self.sink.write(self.prefix + bytes(self.buf) + b"\n")
            self.buf.clear()

    def finish(self):
        """End of file: forward a last line that had no newline."""
        if self.buf:
            self.sink.write(self.prefix + bytes(self.buf) + b"\n")
            self.buf.clear()
        self.pipe.close()
        self.closed = True


class Child:
    """A daemon or trainer process, leader of its own process group."""

    def __init__(self, label, popen):
        self.label = label
        self.popen = popen
        self.returncode = None
        self.streams = []

    @property
    def exited(self):
        return self.returncode is not None

    def reap(self):
        """Returns True when the process has just been found to have exited."""
        if self.returncode is not None:
            return False
        rc = self.popen.poll()
        if rc is None:
            return False
        self.returncode = rc
        return True

    def signal_group(self, sig):
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def group_alive(self):
        """The leader has not exited, or some process of its group is still there."""
        if not self.exited:
            return True
        try:
            os.killpg(self.popen.pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False


def load_libc():
    if ctypes is None or not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


LIBC = load_libc()
LAUNCHER_PID = os.getpid()


def child_setup():
    """Runs in each child before exec: ask for SIGTERM when the launcher dies, even by SIGKILL,
    so that no daemon or trainer outlives it. The launcher is single-threaded, so this is safe."""
    if LIBC is not None:
        LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != LAUNCHER_PID:  # the launcher died before prctl took effect
            os._exit(1)
