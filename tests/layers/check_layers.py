#!/usr/bin/env python3
"""Checks the direction of the house's layers (daemon/README.md and client/README.md, the maps).

  includes  every #include "..." of the tree: a daemon file includes only its own layer and the
            ones below (base < core < net < engine < ps < {job, admin} < daemon.c, main.c; job
            and admin not each other), a client file likewise (base < trace < link < direct < shm < devmap < req <
            api < {groups, ps, bucketer} < grid; the three siblings not each other), and every
            project header by its path; proto/, common/, kernels/ and device/ include nothing of
            client/ or daemon/; client/ nothing of daemon/; nothing includes client/'s private
            headers but client/ and its own tests; daemon/ and client/ include nothing of
            kernels/cpu/ (they run kernels through the executor of their buffers' memory kind,
            kernels/exec.h).
  symbols   every symbol a daemon layer's library needs (nm: undefined) and another layer's
            library defines must be defined in a layer below it: a call upward (or sideways,
            between siblings) is a failure, exactly as linking that library alone with the ones
            below it fails (the layer_link_<layer> programs of CMakeLists.txt).
  client    the same between the client's layers, one static library each.
  circles   no call circle crosses a folder: the graph of which library calls which, over the
            daemon's layers and, apart, over the client's, has no cycle; each one found is named
            with the calls that close it. Independent of the maps above.
  self-test the checker catches what it must: upward includes added to a copy of the tree (in
            the daemon and in the client), an include by bare name, and upward calls added to
            the real symbol tables of the daemon's layers and of the client's, which the symbol
            checks and the circle check must each report.

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
CLIENT_RANK = {"base": 1, "trace": 2, "link": 3, "direct": 4, "shm": 5, "devmap": 6, "req": 7,
               "api": 8, "groups": 9, "ps": 9, "bucketer": 9, "grid": 10}
BELOW_DAEMON = ("proto", "common", "kernels", "device", "include")
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


def check_client_include(rel, inc, problems, where):
    """A file in client/<layer>/ includes client headers of its own layer or below."""
    parts = rel.split("/")
    me = parts[1] if len(parts) > 2 else None
    theirs = inc.split("/")[1] if inc.startswith("client/") and inc.count("/") >= 2 else None
    if me not in CLIENT_RANK:
        problems.append("%s: a client file outside the layer folders %s" %
                        (where, sorted(CLIENT_RANK)))
    elif inc.startswith("client/") and theirs not in CLIENT_RANK:
        problems.append("%s: %s is in no client layer" % (where, inc))
    elif theirs is not None and theirs != me and (CLIENT_RANK[theirs] >= CLIENT_RANK[me]):
        problems.append("%s: %s reaches up from client %s to %s" % (where, inc, me, theirs))


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
    elif top == "client":
        check_client_include(rel, inc, problems, where)
    elif first == "client" and top not in ("client", "tests"):
        problems.append("%s: %s: a private header of the client library" % (where, inc))


def source_files(src_dir):
    for top in ("daemon", "client", "proto", "common", "kernels", "device", "include"):
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


def owners(tables):
    """{symbol: the library of @tables ({library: (defined, undefined)}) that defines it}."""
    owner = {}
    for lib, (defined, _) in sorted(tables.items()):
        for sym in defined:
            owner.setdefault(sym, lib)
    return owner


def check_symbols(tables, rank=None, what="lib"):
    """@tables: {layer: (defined, undefined)}; @rank: the layers' order (equal: siblings).
    Returns the references to a layer that is not below."""
    rank = DAEMON_RANK if rank is None else rank
    owner = owners(tables)
    problems = []
    for layer, (_, undefined) in sorted(tables.items()):
        for sym in sorted(undefined):
            other = owner.get(sym)
            if other is not None and other != layer and rank[other] >= rank[layer]:
                problems.append("%s %s needs %s of %s, which is not below it" % (what, layer, sym,
                                                                                 other))
    return problems


def check_client(tables):
    """The client's layers: @tables {layer: (defined, undefined)} of their libraries."""
    return check_symbols(tables, CLIENT_RANK, "client lib")


def load_tables(libs):
    return {layer: nm_symbols(path) for layer, path in libs}


# ---- circles ---------------------------------------------------------------------------------

def call_graph(tables):
    """{library: {library it calls: [symbols]}} from {library: (defined, undefined)}."""
    owner = owners(tables)
    graph = {lib: {} for lib in tables}
    for lib, (_, undefined) in tables.items():
        for sym in sorted(undefined):
            other = owner.get(sym)
            if other is not None and other != lib:
                graph[lib].setdefault(other, []).append(sym)
    return graph


def strong_components(graph):
    """Tarjan's strongly connected components of @graph ({node: {successor: ...}})."""
    index, low, stack, found = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = stack[stack.index(v):]
            del stack[stack.index(v):]
            found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def check_circles(tables, what):
    """Every call circle between the libraries of @tables, named with the calls that close it."""
    graph = call_graph(tables)
    problems = []
    for comp in strong_components(graph):
        if len(comp) > 1:
            calls = ["%s -> %s (%s)" % (a, b, ", ".join(graph[a][b][:3]))
                     for a in comp for b in comp if b in graph[a]]
            problems.append("%s call circle between %s: %s" % (what, ", ".join(comp),
                                                                "; ".join(calls)))
    return problems


# ---- self-test -------------------------------------------------------------------------------

def injected_includes(src_dir):
    """What the include check finds in a copy of the tree with upward includes added."""
    work = tempfile.mkdtemp(prefix="layers-")
    try:
        for top in ("daemon", "client", "proto", "common", "kernels", "device", "include"):
            shutil.copytree(os.path.join(src_dir, top), os.path.join(work, top))
        clean = check_includes(work)
        additions = {("daemon", "net", "transport.c"): '#include "engine/op.h"\n#include "pool.h"',
                     ("daemon", "engine", "combine.c"): '#include "kernels/cpu/reduce.h"',
                     ("client", "link", "link.c"): '#include "client/req/request.h"',
                     ("client", "ps", "ps.c"): '#include "client/bucketer/bucketer.h"'}
        for path, text in additions.items():
            with open(os.path.join(work, *path), "a") as f:
                f.write("\n" + text + "\n")
        return clean, check_includes(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def expect(found, wants, what, failures):
    for want in wants:
        if not any(want in p for p in found):
            failures.append("%s not caught: %s (found: %s)" % (what, want, found))


def self_test(src_dir, libs, client_libs):
    """Each injected violation must be found; the clean tree must pass."""
    failures = []
    clean, found = injected_includes(src_dir)
    if clean:
        failures.append("the unmodified copy fails the include check: %s" % clean)
    expect(found, ("reaches up from net to engine", '"pool.h" by bare name',
                   "kernels/cpu/reduce.h: a host kernel named past the executor",
                   "reaches up from client link to req", "reaches up from client ps to bucketer"),
           "an injected include", failures)
    daemon, client = load_tables(libs), load_tables(client_libs)
    if check_symbols(daemon) or check_client(client) or check_circles(daemon, "daemon") or \
            check_circles(client, "client"):
        failures.append("the real libraries fail a symbol or circle check")
    daemon["net"][1].add("coll_op_submit")  # the transport calling the engine by name
    client["link"][1].add("coll__req_new")  # the link calling the requests by name
    client["ps"][1].add("coll_bucketer_create")  # a sibling calling another
    expect(check_symbols(daemon), ("lib net needs coll_op_submit of engine",),
           "an injected upward call", failures)
    expect(check_client(client), ("client lib link needs coll__req_new of req",
                                  "client lib ps needs coll_bucketer_create of bucketer"),
           "an injected upward call", failures)
    expect(check_circles(daemon, "daemon"), ("daemon call circle between engine, net",),
           "an injected circle", failures)
    expect(check_circles(client, "client"),
           ("client call circle between devmap, link, req, shm", "link -> req (coll__req_new)"),
           "an injected circle", failures)
    return failures


def parse_libs(items, ranks, flag):
    libs = []
    for item in items or []:
        layer, _, path = item.partition("=")
        if layer not in ranks or not path:
            raise SystemExit("%s LAYER=PATH with LAYER one of %s" % (flag, sorted(ranks)))
        libs.append((layer, path))
    return libs


def run(what, args):
    libs = parse_libs(args.lib, DAEMON_RANK, "--lib")
    client_libs = parse_libs(args.client_lib, CLIENT_RANK, "--client-lib")
    if what == "includes":
        return check_includes(args.source_dir)
    if what == "symbols":
        return check_symbols(load_tables(libs))
    if what == "client":
        return check_client(load_tables(client_libs))
    if what == "circles":
        return (check_circles(load_tables(libs), "daemon") +
                check_circles(load_tables(client_libs), "client"))
    return self_test(args.source_dir, libs, client_libs)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["includes", "symbols", "client", "circles", "self-test"])
    p.add_argument("--source-dir", required=True)
    p.add_argument("--lib", action="append", help="LAYER=path of a daemon layer's library")
    p.add_argument("--client-lib", action="append",
                   help="LAYER=path of a client layer's library")
    args = p.parse_args()
    return report("layers", args.what, run(args.what, args))


def report(tag, what, problems):
    """Print @problems, one a line, then a verdict. @return The exit status (0 clean, 1 not)."""
    for line in problems:
        print("%s: %s" % (tag, line))
    print("%s: %s: %s" % (tag, what, "%d problem(s)" % len(problems) if problems else "clean"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
