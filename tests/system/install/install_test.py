#!/usr/bin/env python3
"""The installed tree used from outside (ctest label ecosystem): `install_test.py NAME ...`.

  install_outside  `cmake --install` into a new, empty prefix; then from outside the project:
                   a CMake project with find_package(collective) builds a rank against the
                   shared and the static library, cc builds it with pkg-config (shared, and
                   static with --static), and each runs an allreduce on 2 nodes x 2 ranks
                   under the installed launcher and daemon; the static ones need no
                   libcollective.so. The installed coll-perf and coll-train run with no
                   LD_LIBRARY_PATH, and the installed Python package imports and runs an
                   allreduce with the installed library, from where Debian's python3 looks
  python_site      with prefix /usr the package goes to /usr/lib/python3/dist-packages, with
                   any other to lib/python3.X/dist-packages, and Debian's python3 has both
                   /usr/... and /usr/local/... of these on its path
  torch_prefix     a prefix of one's own found through PYTHONPATH alone (Python reads no .pth
                   file there): a torch script that imports the package uses the backend
                   "collectived" (2 ranks under the installed launcher, allreduce checked); an
                   unchanged one gets torch's "Invalid backend", and the launcher says why and
                   how to fix it
"""

import glob
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # harness
import harness as h  # noqa: E402
from harness import check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def clean_env(extra=None):
    """The test environment without anything that would find the build tree for a program."""
    env = {k: v for k, v in h.clean_env().items()
           if k not in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH", "PYTHONPATH",
                        "COLLECTIVE_LIB")}
    env.update(extra or {})
    return env


def install(args, prefix, destdir=None):
    root = destdir + prefix if destdir else prefix
    check(not os.path.exists(root), "the prefix %s is not new" % root)
    env = clean_env({"DESTDIR": destdir} if destdir else None)
    h.run(["cmake", "--install", args.build_dir, "--prefix", prefix], timeout=240,
          echo=False, env=env)


def debian_site(prefix):
    """Where the package lies under @prefix (the only collective/__init__.py there)."""
    found = glob.glob(os.path.join(prefix, "lib", "python3*", "dist-packages", "collective",
                                   "__init__.py"))
    check(len(found) == 1, "the Python package under %s: %s" % (prefix, found))
    return os.path.dirname(os.path.dirname(found[0]))


def run_job(prefix, program, env):
    rc, out = h.run([os.path.join(prefix, "bin", "collective-launch"), "--nodes", "2",
                     "--ranks-per-node", "2", "--timeout", "120", "--", program,
                     "--iters", "3", "--count", "100003"], timeout=150, env=env,
                    check=False)
    check(rc == 0 and out.count(": done") == 4, "%s on 2 x 2 (%d):\n%s" % (program, rc, out))


def uses_shared(program, env):
    """(the libcollective.so that @program loads, resolved, or None; ldd's output)."""
    _, out = h.run(["ldd", program], echo=False, env=env)
    for line in out.splitlines():
        if "libcollective.so" in line:
            target = line.split("=>")[1].split("(")[0].strip()
            return (os.path.realpath(target) if target != "not found" else target), out
    return None, out


def san_flags(args):
    """A sanitizer build's libcollective.a needs its runtime in the program that links it."""
    return ["-fsanitize=" + args.sanitize] if args.sanitize else []


def build_with_cmake(args, prefix, work, env):
    build = os.path.join(work, "outside")
    h.run(["cmake", "-S", os.path.join(HERE, "outside"), "-B", build,
           "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_C_FLAGS=" + " ".join(san_flags(args)),
           "-DRANK_SOURCE=" + os.path.join(args.source_dir, "tests", "system", "ops",
                                      "ops_rank.c")],
          timeout=120, env=env, echo=False)
    h.run(["cmake", "--build", build], timeout=240, env=env, echo=False)
    return os.path.join(build, "rank_shared"), os.path.join(build, "rank_static")


def build_with_pkgconfig(args, prefix, work, env):
    pc = glob.glob(os.path.join(prefix, "lib*", "**", "collective.pc"), recursive=True)
    check(len(pc) == 1, "collective.pc: %s" % pc)
    env = dict(env, PKG_CONFIG_PATH=os.path.dirname(pc[0]))
    src = os.path.join(args.source_dir, "tests", "system", "ops", "ops_rank.c")
    cflags = h.run(["pkg-config", "--cflags", "collective"], env=env)[1].split()
    shared = h.run(["pkg-config", "--libs", "collective"], env=env)[1].split()
    static = h.run(["pkg-config", "--static", "--libs", "collective"], env=env)[1].split()
    libdir = h.run(["pkg-config", "--variable=libdir", "collective"], env=env)[1].strip()
    out_shared, out_static = os.path.join(work, "pc_shared"), os.path.join(work, "pc_static")
    cc = ["cc", "-std=c11", "-Wall", "-Werror"] + san_flags(args)
    h.run(cc + ["-o", out_shared, src] + cflags + shared + ["-Wl,-rpath," + libdir],
          env=env)
    h.run(cc + ["-o", out_static, src] + cflags + ["-Wl,-Bstatic"] + static +
          ["-Wl,-Bdynamic"], env=env)
    return out_shared, out_static


PY_RANK = """
import collective, collective._lib as L
with collective.Communicator() as comm:
    x = comm.zeros(1000)
    x[:] = 2.0
    comm.allreduce(x).result(timeout=60)
    print("LIB", L.load()._name)
    print("SUM", float(x.sum()))
"""


def check_python(prefix, env):
    site = debian_site(prefix)
    d = h.Daemon(os.path.join(prefix, "sbin", "collectived"), os.path.dirname(prefix),
                 "pyd").wait_ready()
    try:
        penv = dict(env, PYTHONPATH=site, COLL_SOCKET=d.sock, COLL_JOB="py", COLL_RANK="0",
                    COLL_WORLD_SIZE="1", COLL_LOCAL_RANK="0", COLL_LOCAL_SIZE="1")
        rc, out = h.run([h.PYTHON, "-c", PY_RANK], env=penv, check=False)
        check(rc == 0 and "SUM 2000.0" in out, "the installed package (%d):\n%s" % (rc, out))
        lib = out.split("LIB ", 1)[1].split()[0]
        check(os.path.realpath(lib).startswith(os.path.realpath(prefix) + os.sep),
              "the package loaded %s, not the installed library" % lib)
        rc, out = h.run([os.path.join(prefix, "bin", "coll-perf"), "-b", "4K", "-e", "4K",
                         "-n", "3", "-w", "1"], env=dict(env, COLL_SOCKET=d.sock),
                        check=False)
        check(rc == 0 and "all sizes correct" in out, "installed coll-perf (%d):\n%s"
              % (rc, out))
    finally:
        d.kill()


def test_install_outside(args, work):
    prefix = os.path.join(work, "prefix")
    install(args, prefix)
    env = clean_env()
    for program in ("coll-perf", "coll-train"):
        path = os.path.join(prefix, "bin", program)
        lib, out = uses_shared(path, env)
        check(lib is not None and lib.startswith(os.path.realpath(prefix) + os.sep),
              "%s does not find the installed library:\n%s" % (program, out))
    h.run([os.path.join(prefix, "bin", "coll-train"), "--help"], env=env, echo=False)
    cm_shared, cm_static = build_with_cmake(args, prefix, work, env)
    pc_shared, pc_static = build_with_pkgconfig(args, prefix, work, env)
    for program, shared in ((cm_shared, True), (cm_static, False), (pc_shared, True),
                            (pc_static, False)):
        lib, out = uses_shared(program, env)
        check((lib is not None) == shared, "%s %s libcollective.so:\n%s" % (program,
              "does not use" if shared else "uses", out))
        run_job(prefix, program, env)
    check_python(prefix, env)


def test_python_site(args, work):
    rc, out = h.run([h.PYTHON, "-c", "import sys; print('\\n'.join(sys.path))"],
                    env=clean_env(), echo=False)
    path = out.split()
    dest = os.path.join(work, "dest")
    install(args, "/usr", destdir=dest)
    usr_site = debian_site(os.path.join(dest, "usr"))[len(dest):]
    check(usr_site == "/usr/lib/python3/dist-packages", "with prefix /usr: %s" % usr_site)
    other = os.path.join(work, "other")
    install(args, other)
    rel = os.path.relpath(debian_site(other), other)
    for site in (usr_site, os.path.join("/usr/local", rel)):
        check(site in path, "%s is not on Debian's python3 path %s" % (site, path))


TORCH_SCRIPT = """
import torch
import torch.distributed as dist
dist.init_process_group("collectived")
t = torch.full((4,), float(dist.get_rank() + 1))
dist.all_reduce(t)
print("SUM", t.tolist())
dist.destroy_process_group()
"""


def test_torch_prefix(args, work):
    rc, out = h.run([h.PYTHON, "-c", "import torch.distributed"], env=clean_env(),
                    check=False, echo=False)
    if rc != 0:
        raise h.Skip("no torch: %s" % out.strip()[-200:])
    prefix = os.path.join(work, "prefix")
    install(args, prefix)
    site = debian_site(prefix)
    if not glob.glob(os.path.join(site, "collective", "_torch_pg*.so")):
        raise h.Skip("the torch backend was not built (libtorch-dev, pybind11-dev)")
    env = clean_env({"PYTHONPATH": site, "PYTHONDONTWRITEBYTECODE": "1"})
    for name, text in (("unchanged.py", TORCH_SCRIPT),
                       ("imports.py", "import collective  # registers the backend\n" +
                        TORCH_SCRIPT)):
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    launch = [os.path.join(prefix, "bin", "collective-launch"), "--nodes", "1",
              "--ranks-per-node", "2", "--timeout", "120", "--", h.PYTHON]
    rc, out = h.run(launch + [os.path.join(work, "imports.py")], timeout=150, env=env,
                    check=False)
    check(rc == 0 and out.count("SUM [3.0, 3.0, 3.0, 3.0]") == 2,
          "a script that imports collective (%d):\n%s" % (rc, out))
    rc, out = h.run(launch + [os.path.join(work, "unchanged.py")], timeout=150, env=env,
                    check=False)
    check(rc != 0 and "Invalid backend: 'collectived'" in out,
          "an unchanged script (%d):\n%s" % (rc, out))
    check("hint: torch.distributed does not know the backend 'collectived'" in out and
          "import collective" in out, "the launcher does not say how to fix it:\n%s" % out)


TESTS = {name[len("test_"):]: fn for name, fn in globals().items() if name.startswith("test_")}

if __name__ == "__main__":
    h.main(lambda args, work: TESTS[args.test](args, work), h.named_parser(__doc__, TESTS))
