#!/usr/bin/env python3
"""Checks the direction of the house's layers (daemon/README.md has the map).

  includes  every #include "..." of the tree: a daemon file includes only its own layer and the
            ones below (base < core < net < engine < ps < {job, admin} < daemon.c, main.c; job
            and admin not each other), and every project header by its path; proto/, common/ and
            kernels/ include nothing of client/ or daemon/; client/ nothing of daemon/; nothing
            includes client/'s private headers but client/ and its own tests; daemon/ and client/
            include nothing of kernels/cpu/ (they run kernels through the executor of their
            buffers' memory kind, kernels/exec.h).
  symbols   every symbol a layer's library needs (nm: undefined) and another layer's library
            defines must be defined in a layer below it: a call upward is a failure, exactly as
            linking that library alone with the ones below it would fail.
  client    the same for the client library's files (libcollective.a's objects): base.c and
            the shared base at the bottom, then the timeline and the links, to the daemon (io.c)
            and to the other local ranks (shm*.c), the requests, the communicator, the
            collectives and allocations, the parameter service, the bucketer and the split,
            the 3D-parallel layouts (layout.c) on top; the links reach the requests only
            through the table they register.
  self-test the checker catches what it must: an upward include added to a copy of the tree,
            an include by bare name, and upward calls added to the real symbol tables of the
            daemon's layers and of the client library.

Exit status: 0 clean, 1 a violation (each printed with file:line or library:symbol), 2 usage.
Python 3 standard library only.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

DAEMON_RANK = {"base": 1, "core": 2, "net": 3, "engine": 4, "ps": 5, "job": 6, "admin": 6}
ROOT_RANK = 7  # daemon/daemon.c, daemon/main.c: the composition root
SIBLINGS = {("job", "admin"), ("admin", "job")}
BELOW_DAEMON = ("proto", "common", "kernels", "include")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def daemon_layer(rel):
    """'daemon/engine/algos/ring.c' -> 'engine'; 'daemon/daemon.c' -> 'root'."""
    parts = rel.split("/")
    if len(parts) == 2:
        return "root"
    return parts[1]


def check_daemon_include(rel, inc, problems, where):
    me = daemon_layer(rel)
    first = inc.split("/")[0]
    my_rank = ROOT_RANK if me == "root" else DAEMON_RANK.get(me)
    if first in DAEMON_RANK:
        theirs = DAEMON_RANK[first]
        if theirs > my_rank or (me, first) in SIBLINGS:
            problems.append("%s: %s reaches up from %s to %s" % (where, inc, me, first))
    elif first == "client":
        problems.append("%s: %s: the daemon includes the client library's private header" %
                        (where, inc))
    elif inc == "daemon.h" and me != "root":
        problems.append("%s: daemon.h (the composition root) included below it" % where)


def check_include(rel, inc, problems, where, src_dir):
    top = rel.split("/")[0]
    first = inc.split("/")[0]
    if "/" not in inc and inc != "daemon.h" and not os.path.exists(
            os.path.join(src_dir, os.path.dirname(rel), inc)):
        problems.append("%s: \"%s\" by bare name: name its path" % (where, inc))
        return
    if top in ("daemon", "client") and inc.startswith("kernels/cpu/"):
        problems.append("%s: %s: a host kernel named past the executor (kernels/exec.h)" %
                        (where, inc))
    if top == "daemon":
        check_daemon_include(rel, inc, problems, where)
    elif top in BELOW_DAEMON and first in ("client", "daemon") + tuple(DAEMON_RANK):
        problems.append("%s: %s: %s/ reaches up into %s" % (where, inc, top, first))
    elif top == "client" and (first == "daemon" or first in DAEMON_RANK):
        problems.append("%s: %s: the client library reaches into the daemon" % (where, inc))
    elif first == "client" and top not in ("client", "tests"):
        problems.append("%s: %s: a private header of the client library" % (where, inc))


def source_files(src_dir):
    for top in ("daemon", "client", "proto", "common", "kernels", "include"):
        for dirpath, _, names in os.walk(os.path.join(src_dir, top)):
            for n in sorted(names):
                if n.endswith((".c", ".h", ".cu")):
                    path = os.path.join(dirpath, n)
                    yield os.path.relpath(path, src_dir), path


def check_includes(src_dir):
    problems = []
    for rel, path in source_files(src_dir):
        with open(path, errors="replace") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            check_include(rel, m.group(1), problems, "%s:%d" % (rel, line), src_dir)
    return problems


# ---- symbols ---------------------------------------------------------------------------------

def nm_symbols(lib):
    """(defined, undefined) global symbols of a static library."""
    out = subprocess.run(["nm", "--defined-only", "-g", lib], capture_output=True, text=True,
                         check=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3}
    out = subprocess.run(["nm", "--undefined-only", "-g", lib], capture_output=True, text=True,
                         check=True).stdout
    undefined = {l.split()[-1] for l in out.splitlines() if l.split()}
    return defined, undefined - defined


def check_symbols(tables):
    """@tables: {layer: (defined, undefined)}. Returns the upward (or sideways) references."""
    owner = {}
    for layer, (defined, _) in tables.items():
        for sym in defined:
            owner.setdefault(sym, layer)
    problems = []
    for layer, (_, undefined) in sorted(tables.items()):
        for sym in sorted(undefined):
            other = owner.get(sym)
            if other is None or other == layer:
                continue
            if DAEMON_RANK[other] >= DAEMON_RANK[layer]:
                problems.append("lib %s needs %s of %s, which is not below it" % (layer, sym,
                                                                                  other))
    return problems


def load_tables(libs):
    return {layer: nm_symbols(path) for layer, path in libs}


# ---- the client library's files -------------------------------------------------------------

CLIENT_RANK = {"status.c.o": 0, "dtype.c.o": 0, "size.c.o": 0,
               # the wire code (proto/), which libcollective.a holds too
               "collective.pb-c.c.o": 0, "frame.c.o": 0, "wire.c.o": 0, "ctl.c.o": 0,
               "desc.c.o": 0, "jobmsg.c.o": 0, "ps_records.c.o": 0, "ps_names.c.o": 0,
               "compression.c.o": 0, "shm_area.c.o": 0,
               # the executors (kernels/), the host's of which the local ranks reduce with
               "exec.c.o": 0, "exec_host.c.o": 0, "reduce.c.o": 0, "cast.c.o": 0,
               "onebit.c.o": 0, "topk.c.o": 0, "lowrank.c.o": 0, "optim_step.c.o": 0,
               "isa.c.o": 0, "isa_scalar.c.o": 0, "isa_avx2.c.o": 0, "isa_avx512.c.o": 0,
               "debug.c.o": 1, "base.c.o": 1, "env.c.o": 1, "launcher.c.o": 1,
               "bucket_plan.c.o": 1, "timeline.c.o": 2, "io.c.o": 2, "shm.c.o": 2,
               "shm_progress.c.o": 2, "shm_exec.c.o": 2, "shm_node.c.o": 2, "request.c.o": 3,
               "comm.c.o": 4, "mem.c.o": 5, "collectives.c.o": 5, "ps.c.o": 6, "ps_ckpt.c.o": 6,
               "compress.c.o": 5,
               "bucketer.c.o": 7, "bucketer_wait.c.o": 7, "split_plan.c.o": 1, "split.c.o": 6,
               "layout.c.o": 8}


NM_LINE = re.compile(r"^.*?\.a:([^:]+):\s*(?:[0-9a-f]+\s+)?\w\s+(\S+)$")


def archive_tables(lib):
    """{member: (defined, undefined)} of a static library's objects."""
    tables = {}
    for flag, slot in (("--defined-only", 0), ("--undefined-only", 1)):
        out = subprocess.run(["nm", "-A", "-g", flag, lib], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            m = NM_LINE.match(line)
            if m:
                tables.setdefault(m.group(1), (set(), set()))[slot].add(m.group(2))
    return tables


def check_client(lib, extra=None):
    """@extra: (member, symbol) to add to what a member needs (the self-test's injection)."""
    tables = archive_tables(lib)
    if extra is not None:
        tables[extra[0]][1].add(extra[1])
    owner = {}
    for member, (defined, _) in tables.items():
        for sym in defined:
            owner.setdefault(sym, member)
    problems = []
    for member, (_, undefined) in sorted(tables.items()):
        if member not in CLIENT_RANK:
            problems.append("client file %s has no place in the map (check_layers.py)" % member)
            continue
        for sym in sorted(undefined):
            other = owner.get(sym)
            if other in CLIENT_RANK and CLIENT_RANK[other] > CLIENT_RANK[member]:
                problems.append("client %s needs %s of %s, above it" % (member, sym, other))
    return problems


# ---- self-test -------------------------------------------------------------------------------

def self_test(src_dir, libs, client_lib):
    """Each injected violation must be found; the clean tree must pass."""
    failures = []
    work = tempfile.mkdtemp(prefix="layers-")
    try:
        for top in ("daemon", "client", "proto", "common", "kernels", "include"):
            shutil.copytree(os.path.join(src_dir, top), os.path.join(work, top))
        if check_includes(work):
            failures.append("the unmodified copy fails the include check")
        victim = os.path.join(work, "daemon", "net", "transport.c")
        with open(victim, "a") as f:
            f.write('\n#include "engine/op.h"\n#include "pool.h"\n')
        with open(os.path.join(work, "daemon", "engine", "combine.c"), "a") as f:
            f.write('\n#include "kernels/cpu/reduce.h"\n')
        found = check_includes(work)
        for want in ("reaches up from net to engine", '"pool.h" by bare name',
                     "kernels/cpu/reduce.h: a host kernel named past the executor"):
            if not any(want in p for p in found):
                failures.append("an injected include was not caught: %s (found: %s)" % (want,
                                                                                      found))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    tables = load_tables(libs)
    if check_symbols(tables):
        failures.append("the real libraries fail the symbol check")
    tables["net"][1].add("coll_op_submit")  # transport calling the engine by name
    if not any("coll_op_submit of engine" in p for p in check_symbols(tables)):
        failures.append("an injected upward call (net -> engine) was not caught")
    if check_client(client_lib):
        failures.append("the real client library fails the client check")
    found = check_client(client_lib, ("io.c.o", "coll__dispatch"))  # the link calling up
    if not any("coll__dispatch of request.c.o" in p for p in found):
        failures.append("an injected upward call (io.c -> request.c) was not caught")
    return failures


def parse_libs(items):
    libs = []
    for item in items or []:
        layer, _, path = item.partition("=")
        if layer not in DAEMON_RANK or not path:
            raise SystemExit("--lib LAYER=PATH with LAYER one of %s" % sorted(DAEMON_RANK))
        libs.append((layer, path))
    return libs


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["includes", "symbols", "client", "self-test"])
    p.add_argument("--source-dir", required=True)
    p.add_argument("--lib", action="append", help="LAYER=path of its static library")
    p.add_argument("--client-lib", help="libcollective.a")
    args = p.parse_args()
    libs = parse_libs(args.lib)
    if args.what == "includes":
        problems = check_includes(args.source_dir)
    elif args.what == "symbols":
        problems = check_symbols(load_tables(libs))
    elif args.what == "client":
        problems = check_client(args.client_lib)
    else:
        problems = self_test(args.source_dir, libs, args.client_lib)
    for line in problems:
        print("layers: " + line)
    print("layers: %s: %s" % (args.what, "%d problem(s)" % len(problems) if problems else "clean"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
