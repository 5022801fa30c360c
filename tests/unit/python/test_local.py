#!/usr/bin/env python3
"""Python package without a daemon: finding libcollective ($COLLECTIVE_LIB, the build tree, a
clear error), errors as exceptions (connection refused, bad parameters), datatype and buffer
checks, and the DDP hook's signature as DDP checks it.

Also: the ctypes declarations (structs, parameter counts) match collective.h.
Usage: test_local.py --lib build/client/libcollective.so --header include/collective.h
Exit status: 0 all passed, 1 a failure, 77 (skip) when numpy is missing.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "system",
                                "python"))
import common  # noqa: E402

np = common.require("numpy")
torch = common.optional("torch")
import collective  # noqa: E402
from collective import CollectiveError, CollectiveTimeoutError, types  # noqa: E402

LIB = None  # --lib
HEADER = None  # --header


def python(code, **env):
    """Run @code in a fresh interpreter (the library is loaded once per process) with @env
    added (None removes a variable); returns (exit code, stdout + stderr)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("COLL")}
    for k, v in env.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    p = subprocess.run([sys.executable, "-c", code], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace")


class Library(unittest.TestCase):
    def test_from_env(self):
        rc, out = python("import collective._lib as l; print(l.load()._name)",
                         COLLECTIVE_LIB=LIB)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.strip(), LIB)

    def test_next_to_the_package_in_the_build_tree(self):
        pkg = os.path.dirname(os.path.abspath(collective.__file__))
        want = os.path.normpath(os.path.join(pkg, "..", "..", "client", "libcollective.so"))
        if not os.path.exists(want):
            self.skipTest("the package is not in a build tree (%s)" % pkg)
        rc, out = python("import collective._lib as l; print(l.load()._name)",
                         COLLECTIVE_LIB=None)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.strip(), want)

    def test_missing_library_is_a_clear_error(self):
        rc, out = python("import collective\ncollective.Communicator()",
                         COLLECTIVE_LIB="/nonexistent/libcollective.so")
        self.assertNotEqual(rc, 0)
        self.assertIn("LibraryNotFoundError", out)
        self.assertIn("/nonexistent/libcollective.so: no such file", out)
        self.assertIn("COLLECTIVE_LIB", out)


def c_declarations(path):
    """(struct fields by typedef name, parameter counts by function name) of a C header and of
    the public headers beside it (collective.h includes collective_bucketer.h)."""
    text = ""
    for name in sorted(glob.glob(os.path.join(os.path.dirname(path), "collective*.h"))):
        with open(name) as f:
            text += re.sub(r"/\*.*?\*/|//[^\n]*", " ", f.read(), flags=re.S)
    structs = {}
    for body, name in re.findall(r"typedef struct \{(.*?)\}\s*(\w+);", text, re.S):
        structs[name] = [re.search(r"(\w+)\s*(\[\w*\])?$", v.strip()).group(1)
                         for d in body.split(";") if d.strip() for v in d.split(",")]
    functions = {}
    for name, params in re.findall(r"COLL_API[^;(]*?\b(\w+)\s*\(([^)]*)\)\s*;", text):
        functions[name] = 0 if params.strip() in ("", "void") else params.count(",") + 1
    return structs, functions


class Declarations(unittest.TestCase):
    """The ctypes declarations of collective._lib match include/collective.h."""

    def test_structs(self):
        from collective import _lib
        structs, _ = c_declarations(HEADER)
        for cls, name in ((_lib.CommParams, "coll_comm_params_t"),
                          (_lib.OpParams, "coll_op_params_t"),
                          (_lib.ReqTiming, "coll_req_timing_t"),
                          (_lib.Compression, "coll_compression_t"),
                          (_lib.PsOptim, "coll_ps_optim_t"),
                          (_lib.PsSchedule, "coll_ps_schedule_t"),
                          (_lib.PsLayer, "coll_ps_layer_t"),
                          (_lib.PsParams, "coll_ps_params_t"),
                          (_lib.Layout, "coll_layout_t")):
            self.assertEqual([f[0] for f in cls._fields_], structs[name], name)

    def test_functions(self):
        from collective import _lib
        _, functions = c_declarations(HEADER)
        for name, (_, argtypes) in _lib._PROTOTYPES.items():
            self.assertIn(name, functions)
            self.assertEqual(len(argtypes), functions[name], name)


class Errors(unittest.TestCase):
    def test_connection_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(CollectiveError) as cm:
                collective.Communicator(socket=os.path.join(tmp, "none.sock"), job="j", rank=0,
                                        world_size=1, local_rank=0, local_size=1, timeout=1)
        e = cm.exception
        self.assertEqual((e.status, e.name), (-111, "COLL_ERR_CONNREFUSED"))
        self.assertEqual(e.strerror, "connection refused (is collectived running?)")
        self.assertIn("coll_comm_create: COLL_ERR_CONNREFUSED", str(e))
        self.assertIn("cannot connect to collectived at %s" % os.path.join(tmp, "none.sock"),
                      e.detail)  # the library's own message, not only on stderr

    def test_missing_environment(self):
        rc, out = python("import collective\n"
                         "try:\n"
                         "    collective.Communicator()\n"
                         "except collective.CollectiveError as e:\n"
                         "    print('caught', e.name, e.detail)\n", COLLECTIVE_LIB=LIB,
                         RANK=None, WORLD_SIZE=None)
        self.assertEqual(rc, 0, out)
        self.assertIn("caught COLL_ERR_INVALID", out)
        self.assertIn("is not set", out)   # the detail names the missing variable
        self.assertNotIn("libcollective", out)   # and is not printed by the library too

    def test_parameters_come_in_pairs(self):
        with self.assertRaises(ValueError):
            collective.Communicator(rank=0)
        with self.assertRaises(ValueError):
            collective.Communicator(local_size=2)

    def test_exception_classes(self):
        e = CollectiveError(-1002, "rank 1 sent 151 elements, rank 0 100")
        self.assertEqual(e.name, "COLL_ERR_MISMATCH")
        self.assertEqual(str(e), "COLL_ERR_MISMATCH: ranks submitted different descriptors "
                         "for the same operation: rank 1 sent 151 elements, rank 0 100")
        t = collective.errors.make_error(-110)
        self.assertIsInstance(t, CollectiveTimeoutError)
        self.assertIsInstance(t, TimeoutError)
        self.assertEqual(CollectiveError(-4242).name, "COLL_ERR_UNKNOWN")


class Types(unittest.TestCase):
    def test_names(self):
        self.assertEqual(types.parse_op("avg"), collective.Op.AVG)
        self.assertEqual(types.parse_op(collective.Op.MAX), collective.Op.MAX)
        self.assertEqual(types.parse_op("bxor"), collective.Op.BXOR)
        self.assertEqual(types.parse_op(5), collective.Op.BAND)
        self.assertEqual(types.parse_algo("rd"), collective.Algo.RD)
        self.assertEqual(types.parse_dtype("bfloat16"), collective.DType.BFLOAT16)
        self.assertEqual(types.parse_dtype(np.int8), collective.DType.INT8)
        self.assertEqual(collective.DType.FLOAT64.itemsize, 8)
        with self.assertRaises(ValueError):
            types.parse_op("mean")
        with self.assertRaises(ValueError):
            types.parse_algo(9)
        with self.assertRaises(TypeError):
            types.parse_dtype(np.complex64)

    def test_buffer_info(self):
        a = np.zeros((3, 4), np.int32)
        info = types.buffer_info(a)
        self.assertEqual((info.addr, info.count, info.dtype, info.nbytes),
                         (a.ctypes.data, 12, collective.DType.INT32, 48))
        self.assertEqual(types.buffer_info(a.view(np.uint16), "bfloat16").count, 24)
        with self.assertRaises(ValueError):
            types.buffer_info(a.T)
        with self.assertRaises(TypeError):
            types.buffer_info(a, "float64")
        with self.assertRaises(TypeError):
            types.buffer_info(np.zeros(2, np.uint16))
        with self.assertRaises(TypeError):
            types.buffer_info(memoryview(b"abc"))

    @unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
    def test_tensor_info(self):
        t = torch.zeros(5, dtype=torch.bfloat16)
        info = types.buffer_info(t)
        self.assertEqual((info.addr, info.count, info.dtype), (t.data_ptr(), 5,
                                                                collective.DType.BFLOAT16))
        with self.assertRaises(ValueError):
            types.buffer_info(torch.zeros(4, 4).t())


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class DDPHook(unittest.TestCase):
    def test_signature_passes_ddp_check(self):
        import collective.ddp
        from torch.nn.parallel import DistributedDataParallel as DDP
        DDP._check_comm_hook(object(), collective.ddp.allreduce_hook)  # raises when wrong

    def test_root_host(self):
        import collective.ddp
        for root, host in (("10.0.0.5:29510", "10.0.0.5"), ("[::1]:29510", "::1"), ("", None),
                           ("node01:1", "node01")):
            os.environ["COLL_ROOT"] = root
            self.assertEqual(collective.ddp._root_host(), host)
        del os.environ["COLL_ROOT"]


@unittest.skipIf(torch is None, "torch is not installed (python3-torch)")
class ServiceOptimizerArguments(unittest.TestCase):
    """What collective.optim makes of its arguments before any communication."""

    def test_settings_over_the_references_defaults(self):
        from collective import _lib, optim
        o = optim._optim(_lib.load(), "lamb", {"betas": (0.8, 0.9), "trust_clamp": (0.1, 10),
                                               "lamb_bias": "stepsize", "nesterov": 1,
                                               "eps": None})
        self.assertEqual((o.kind, o.beta1, o.beta2, o.trust_min, o.trust_max, o.lamb_bias,
                          o.nesterov, o.eps, o.weight_decay),
                         (3, 0.8, 0.9, 0.1, 10.0, 2, 1, 1e-6, 0.01))
        with self.assertRaises(ValueError):
            optim._optim(_lib.load(), "adam", {})
        with self.assertRaises(TypeError):
            optim._optim(_lib.load(), "sgd", {"lr_decay": 0.1})
        with self.assertRaises(ValueError):
            optim._optim(_lib.load(), "lamb", {"lamb_bias": "apex"})

    def test_schedule(self):
        from collective import _lib, optim
        s = optim._schedule(_lib.load(), 0.1, {"base_batch": 256, "global_batch": 8192,
                                               "warmup_steps": 5, "decay": "step",
                                               "milestones": [30, 60], "gamma": 0.1})
        self.assertEqual((s.base_lr, s.base_batch, s.global_batch, s.warmup_steps,
                          s.warmup_start_lr, s.decay, s.num_milestones, list(s.milestones)[:3],
                          s.gamma), (0.1, 256, 8192, 5, -1.0, 1, 2, [30, 60, 0], 0.1))
        with self.assertRaises(TypeError):
            optim._schedule(_lib.load(), 0.1, {"warmup_epochs": 5})
        with self.assertRaises(ValueError):
            optim._schedule(_lib.load(), 0.1, {"decay": "linear"})
        with self.assertRaises(ValueError):
            optim._schedule(_lib.load(), 0.1, {"milestones": list(range(17))})

    def test_layers_and_buckets(self):
        from collective import optim
        w, b, n = torch.zeros(100, 10), torch.zeros(100), torch.zeros(3)
        tensors, flags = optim._layers(
            [{"params": [w]}, {"params": b, "weight_decay": 0},
             {"params": [n], "weight_decay": 0, "trust": False}], 0.01)
        self.assertEqual([t is x for t, x in zip(tensors, (w, b, n))], [True] * 3)
        self.assertEqual(flags, [0, 1, 3])
        self.assertEqual(optim._layers([w], 0.01)[1], [0])
        # 4000 bytes, then 400 + 12 with a cap of 4000: a layer over the cap alone.
        self.assertEqual(optim._buckets(tensors, 4000), [0, 1, 1])
        self.assertEqual(optim._buckets(tensors, 1000), [0, 1, 1])
        self.assertEqual(optim._buckets(tensors, 100), [0, 1, 2])
        for bad in ([{"params": [w], "lr": 0.1}], [{"params": [w], "weight_decay": 0.5}],
                    [w, w], [torch.zeros(3, dtype=torch.float64)], [torch.zeros(0)], []):
            with self.assertRaises(ValueError):
                optim._layers(bad, 0.01)


def main():
    global LIB, HEADER
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", required=True, help="libcollective.so of the build")
    p.add_argument("--header", required=True, help="include/collective.h")
    args = p.parse_args()
    LIB, HEADER = os.path.abspath(args.lib), args.header
    return common.run_tests(__name__)


if __name__ == "__main__":
    sys.exit(main())
