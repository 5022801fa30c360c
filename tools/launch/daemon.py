"""The daemon binary: where collectived lies, and the control address it writes once it is up."""

import os
import re
import shutil

from .report import LaunchError

ADDR_RE = re.compile(r"^\S+:\d+$")


def executable_file(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def resolve_program(value, what):
    """A path (made absolute: daemons run in their node directory) or a name looked up in PATH."""
    if os.sep in value:
        path = os.path.abspath(value)
        if not executable_file(path):
            raise LaunchError("%s: %s is not an executable file" % (what, path))
        return path
    found = shutil.which(value)
    if found is None:
        raise LaunchError("%s: %s not found in PATH" % (what, value))
    return os.path.abspath(found)


def find_daemon(option, script):
    """--daemon, else $COLLECTIVED, else the build tree next to the launcher's script (its path
    as run, and with symbolic links resolved), else PATH."""
    if option:
        return resolve_program(option, "--daemon")
    if os.environ.get("COLLECTIVED"):
        return resolve_program(os.environ["COLLECTIVED"], "COLLECTIVED")
    tried = []
    for here in dict.fromkeys([os.path.dirname(os.path.abspath(script)),
                               os.path.dirname(os.path.realpath(script))]):
        for rel in (("..", "daemon", "collectived"), ("collectived",),
                    ("..", "sbin", "collectived")):
            cand = os.path.normpath(os.path.join(here, *rel))
            tried.append(cand)
            if executable_file(cand):
                return cand
    found = shutil.which("collectived")
    if found is not None:
        return os.path.abspath(found)
    raise LaunchError("cannot find collectived: give --daemon PATH or set COLLECTIVED (tried %s "
                      "and PATH)" % ", ".join(tried))


def read_addr(path, last_seen):
    """The control address in an addr file once it is complete: a host:port line that ends in a
    newline, or without one that reads the same on two polls in a row."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    line = text.strip()
    if not ADDR_RE.match(line):
        return None
    if text.endswith("\n") or last_seen.get(path) == text:
        return line
    last_seen[path] = text
    return None
