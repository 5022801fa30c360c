#!/usr/bin/env python3
"""Checks every size and offset the documents state against the code, so that they cannot drift.

The documents (proto/README.md, docs/architecture.md) state them in two kinds of table, found by
their header row:

  | what | value | checked as |          one figure a row: the value ("96 bytes", "32 KiB",
  |---|---|---|                          "16 MiB", "28 bits", "2^20", "1,023") and the C
  | submission record | 96 bytes | `sizeof(coll_submission_t)` |   expression that must equal it

  | record | bytes | fields at their offsets |    one struct a row: its size and every one of its
  |---|---|---|                                  fields, in order, each with its offset
  | `coll_jobmsg_t` | 24 | type 0, status 4, node 8, lost 12, epoch 16 |

A probe program that includes every header of proto/ prints each expression, each sizeof and
each offsetof (built with --cc); clang's record layouts of the same program (--clang, with
-fdump-record-layouts) give every field each struct really has, so a field added to a struct
without its row fails even where it fits in padding and changes no size.

  check      the documents against the tree
  self-test  the check fails as it must: on a copy of proto/ with a field added to the
             submission record, and one added in the padding of the control block; on a copy
             of a document with a figure changed; and passes on the unmodified copies

Exit status: 0 clean, 1 a mismatch (each named with its document and row), 2 usage, 77 skipped
(no clang). Python 3 standard library only.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from check_layers import report

DOCS = ("proto/README.md", "docs/architecture.md")
FIGURES = ("what", "value", "checked as")
RECORDS = ("record", "bytes", "fields at their offsets")
UNITS = {"": 1, "byte": 1, "bytes": 1, "bit": 1, "bits": 1, "KiB": 1 << 10, "MiB": 1 << 20}
VALUE = re.compile(r"^(\d[\d,]*)(?:\^(\d+))?\s*(bytes?|bits?|KiB|MiB)?$")
HEADERS = ("proto/*.h", "kernels/mem_kind.h", "device/dev.h")


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(text):
    """(header cells, [(line number, cells)]) of every markdown table of @text."""
    found, rows, header = [], [], None
    for n, line in enumerate(text.splitlines() + [""], 1):
        if line.lstrip().startswith("|"):
            if header is None:
                header = tuple(c.lower() for c in cells(line))
            elif not set(line.strip()) <= set("|-: "):
                rows.append((n, cells(line)))
            continue
        if header is not None:
            found.append((header, rows))
        header, rows = None, []
    return found


def parse_value(text):
    m = VALUE.match(text.strip())
    if m is None:
        return None
    base = int(m.group(1).replace(",", ""))
    if m.group(2):
        base **= int(m.group(2))
    return base * UNITS[m.group(3) or ""]


def code(cell):
    m = re.fullmatch(r"`([^`]+)`", cell.strip())
    return m.group(1) if m else None


def read_docs(root, docs, problems):
    """[(where, expression, value)] and [(where, struct, bytes, [(field, offset)])]."""
    figures, records = [], []
    for doc in docs:
        with open(os.path.join(root, doc)) as f:
            text = f.read()
        for header, rows in tables(text):
            for n, row in rows:
                where = "%s:%d" % (doc, n)
                if header == FIGURES:
                    read_figure(where, row, figures, problems)
                elif header == RECORDS:
                    read_record(where, row, records, problems)
    return figures, records


def read_figure(where, row, figures, problems):
    value, expr = parse_value(row[1]), code(row[2]) if len(row) > 2 else None
    if value is None or expr is None:
        problems.append("%s: a figure is a number with bytes, bits, KiB or MiB, and a C "
                        "expression in backquotes: %s" % (where, " | ".join(row)))
    else:
        figures.append((where, expr, value))


def read_record(where, row, records, problems):
    name, size = code(row[0]), parse_value(row[1])
    fields = [f.split() for f in row[2].split(",")] if len(row) > 2 else []
    if name is None or size is None or not fields or any(len(f) != 2 or not f[1].isdigit()
                                                         for f in fields):
        problems.append("%s: a record row is `struct`, its bytes, and 'field offset, ...': %s" %
                        (where, " | ".join(row)))
        return
    records.append((where, name, size, [(f[0], int(f[1])) for f in fields]))


def probe_source(root, figures, records):
    headers = sorted(h for pattern in HEADERS for h in glob_headers(root, pattern))
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += ['#include "%s"' % h for h in headers]
    # A constant context makes clang lay out (and dump) every record, used or not.
    lines += ['_Static_assert(sizeof(%s) > 0, "laid out");' % name for _, name, _, _ in records]
    lines += ["int main(void)", "{"]
    for _, expr, _ in figures:
        lines.append('    printf("%%llu\\n", (unsigned long long)(%s));' % expr)
    for _, name, _, fields in records:
        lines.append('    printf("%%zu\\n", sizeof(%s));' % name)
        for field, _ in fields:
            lines.append('    printf("%%zu\\n", offsetof(%s, %s));' % (name, field))
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def glob_headers(root, pattern):
    folder, _, suffix = pattern.partition("*")
    if not suffix:
        yield pattern
        return
    for n in sorted(os.listdir(os.path.join(root, folder))):
        if n.endswith(suffix):
            yield folder + n


def run_probe(args, root, source, work):
    path = os.path.join(work, "probe.c")
    with open(path, "w") as f:
        f.write(source)
    flags = ["-I", root, "-I", os.path.join(root, "include"), "-I", args.build_dir]
    exe = os.path.join(work, "probe")
    built = subprocess.run([args.cc, "-std=gnu11", "-o", exe, path] + flags,
                           capture_output=True, text=True)
    if built.returncode != 0:
        return None, built.stderr
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    layouts = None
    if args.clang:
        dump = subprocess.run([args.clang, "-std=gnu11", "-fsyntax-only", "-Xclang",
                               "-fdump-record-layouts", path] + flags, capture_output=True,
                              text=True, check=True).stdout
        layouts = record_layouts(dump)
    return ([int(v) for v in out.split()], layouts), None


def record_layouts(dump):
    """{struct name: [top-level field names]} from clang's -fdump-record-layouts."""
    layouts, fields, name = {}, None, None
    for line in dump.splitlines():
        if line.startswith("*** Dumping AST Record Layout"):
            fields, name = [], None
            continue
        m = re.match(r"^\s*\d+ \|( *)(.*\S)\s*$", line)
        if fields is None or m is None:
            continue
        if name is None:
            name = m.group(2).split()[-1]
            layouts.setdefault(name, fields)
        elif len(m.group(1)) == 3:
            fields.append(m.group(2).split()[-1])
    return layouts


def compare(figures, records, values, layouts):
    problems, at = [], 0
    for where, expr, want in figures:
        if values[at] != want:
            problems.append("%s: %s is %d, the document says %d" % (where, expr, values[at],
                                                                   want))
        at += 1
    for where, name, size, fields in records:
        if values[at] != size:
            problems.append("%s: sizeof(%s) is %d, the document says %d" % (where, name,
                                                                           values[at], size))
        at += 1
        for field, off in fields:
            if values[at] != off:
                problems.append("%s: %s.%s is at %d, the document says %d" % (where, name, field,
                                                                             values[at], off))
            at += 1
        real = (layouts or {}).get(name)
        if layouts is not None and real != [f for f, _ in fields]:
            problems.append("%s: %s has the fields %s, the document lists %s" %
                            (where, name, real, [f for f, _ in fields]))
    return problems


def check(args, root, docs_root):
    problems = []
    figures, records = read_docs(docs_root, DOCS, problems)
    if not figures or not records:
        problems.append("no checked tables found in %s" % ", ".join(DOCS))
        return problems
    work = tempfile.mkdtemp(prefix="sizes-")
    try:
        got, err = run_probe(args, root, probe_source(root, figures, records), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if got is None:
        return problems + ["a documented expression, struct or field does not compile:\n" + err]
    return problems + compare(figures, records, got[0], got[1])


def copy_tree(root, work):
    for top in ("proto", "kernels", "device", "include", "common", "docs"):
        shutil.copytree(os.path.join(root, top), os.path.join(work, top))
    return work


def edit(path, old, new):
    with open(path) as f:
        text = f.read()
    if old not in text:
        raise SystemExit("self-test: %r not found in %s" % (old, path))
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


def self_test(args, root):
    """Each modification must fail the check, naming what changed; the copy must pass."""
    cases = [
        ("a field added to the submission record", "proto/submission.h",
         "} coll_submission_t;", "    uint32_t added;\n} coll_submission_t;", "coll_submission_t"),
        ("a field added in the control block's padding", "proto/ctl.h",
         "    _Atomic uint32_t frames;", "    _Atomic uint32_t frames;\n    uint32_t added;",
         "coll_ctl_t has the fields"),
        ("a figure changed in a document", "proto/README.md",
         "| 96 bytes | `sizeof(coll_submission_t)` |", "| 72 bytes | `sizeof(coll_submission_t)` |",
         "sizeof(coll_submission_t) is 96, the document says 72"),
    ]
    failures = []
    work = copy_tree(root, tempfile.mkdtemp(prefix="sizes-self-"))
    try:
        if check(args, work, work):
            failures.append("the unmodified copy fails: %s" % check(args, work, work))
        for what, path, old, new, want in cases:
            case = copy_tree(root, tempfile.mkdtemp(prefix="sizes-case-"))
            try:
                edit(os.path.join(case, path), old, new)
                found = check(args, case, case)
                if not any(want in p for p in found):
                    failures.append("%s was not caught (want '%s', found %s)" % (what, want,
                                                                                 found))
            finally:
                shutil.rmtree(case, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["check", "self-test"])
    p.add_argument("--source-dir", required=True)
    p.add_argument("--build-dir", required=True, help="where proto/collective.pb-c.h is")
    p.add_argument("--cc", required=True, help="the C compiler of the build")
    p.add_argument("--clang", help="clang, for the fields every struct has")
    args = p.parse_args()
    if not args.clang:
        print("sizes: skipped: no clang to list the structs' fields (deploy/install-deps.sh)")
        return 77
    problems = (check(args, args.source_dir, args.source_dir) if args.what == "check" else
                self_test(args, args.source_dir))
    return report("sizes", args.what, problems)


if __name__ == "__main__":
    sys.exit(main())
