#!/usr/bin/env python3
"""coll-plan refuses what cannot exist and plans what was published (ctest -L ecosystem).

  - every bad input a new user tried (a negative MLP width, zero KV heads, negative parameters,
    a negative micro-batch) and the others of the same kinds exit 2 with one message naming the
    input; several bad inputs are all reported, one line each;
  - Megatron-LM's published GPT-3 175B example (examples/gpt3/train_gpt3_175b_distributed.sh:
    tp 8, pp 16, micro-batch 1, global batch 1536, fp16) fits an 80 GB GPU by default, and its
    peak memory is within 15 % of Megatron's own estimate (megatron/training/
    theoretical_memory_usage.py), computed here from that file's formulas;
  - NeMo's Llama-2-70B recipe (NeMo-Framework-Launcher conf/training/llama/llama2_70b.yaml:
    128 nodes x 8, tp 4, pp 4, 20 virtual stages, sequence parallelism, the distributed
    optimizer, global batch 2048) is a layout that fits;
  - --attention standard stores the scores again: the 175B example then needs more than 80 GB.
"""

import argparse
import json
import os
import subprocess
import sys
import unittest

TOOL = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                     "..", "tools", "coll-plan"))
CLUSTER = ["--nodes", "4", "--gpus-per-node", "8"]
GPT3_EXAMPLE = ["--model", "gpt3-175b", "--global-batch", "1536", "--micro-batch", "1",
                "--precision", "fp16", "--nodes", "16", "--gpus-per-node", "8"]
LLAMA2_RECIPE = ["--model", "llama2-70b", "--global-batch", "2048", "--micro-batch", "1",
                 "--sequence-parallel", "--zero", "1", "--virtual-stages", "20",
                 "--nodes", "128", "--gpus-per-node", "8"]
MIB = 1024 * 1024


def run_tool(args):
    """(exit status, stdout, stderr lines) of coll-plan."""
    p = subprocess.run([sys.executable, TOOL] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    return p.returncode, p.stdout, p.stderr.splitlines()


def layout(doc, tp, pp):
    """The feasible layout (tp, pp, *) of a --json plan, or None."""
    found = [r for r in doc["layouts"] if (r["tp"], r["pp"]) == (tp, pp)]
    return found[0] if found else None


def megatron_gpt3_example_bytes():
    """Megatron-LM's theoretical memory of the GPT-3 175B example, in bytes: weights and
    optimizer, 18 bytes per parameter of the most loaded shard (the first stage: its 96/16 layers
    and the word embedding, over tp); activations by compute_activation_memory_without_sp
    (sequence parallelism is off): sbh(10 + 24/t) per layer, all 96 layers on the first stage
    (L/p layers x p micro-batches in flight), the embedding's input and dropout for p
    micro-batches, times 1.05."""
    layers, h, s, b, t, p, vocab = 96, 12288, 2048, 1, 8, 16, 51200
    ffn, norm = 4 * h, 2
    layer = 2 * h * (ffn + norm) + 2 * h * h * 2          # MLP, norms; attention (Q, K, V, out)
    block = layer * layers + norm * h                      # and the final LayerNorm
    shard = (block / p + h * vocab) / t
    weights_and_optimizer = shard * 18
    activations = s * b * h * (10 + 24 / t) * layers
    activations += 8 * s * b * p + s * b * h * p
    activations *= min(1, 1536 / p) * 1.05
    return weights_and_optimizer + activations


class BadInputs(unittest.TestCase):
    def assertRefused(self, args, option, words):
        status, out, err = run_tool(args)
        self.assertEqual(status, 2, (args, out, err))
        self.assertEqual(out, "")
        self.assertEqual(len(err), 1, err)
        self.assertIn(option, err[0])
        self.assertIn(words, err[0])

    def test_the_inputs_a_new_user_tried(self):
        llama = ["--model", "llama2-70b"] + CLUSTER
        self.assertRefused(llama + ["--ffn-hidden", "-28672"], "--ffn-hidden -28672",
                           "positive integer")
        self.assertRefused(llama + ["--kv-heads", "0"], "--kv-heads 0", "positive integer")
        self.assertRefused(["--params", "-70e9"] + CLUSTER, "--params -70e9", "positive")
        self.assertRefused(llama + ["--micro-batch", "-1"], "--micro-batch -1",
                           "positive integer")

    def test_kv_heads_must_divide_heads(self):
        self.assertRefused(["--model", "llama2-70b", "--kv-heads", "3"] + CLUSTER,
                           "--kv-heads 3", "does not divide --heads 64")

    def test_every_kind_of_number(self):
        base = ["--model", "gpt2-small"] + CLUSTER
        for option, value, words in (("--layers", "2.5", "positive integer"),
                                     ("--heads", "x", "not a number"),
                                     ("--global-batch", "0", "positive integer"),
                                     ("--micro-batches", "-4", "positive integer"),
                                     ("--virtual-stages", "0", "positive integer"),
                                     ("--nodes", "-2", "positive integer"),
                                     ("--gpu-mem", "-80GB", "positive"),
                                     ("--gpu-mem", "0", "positive"),
                                     ("--intra-bw", "-600GB/s", "positive"),
                                     ("--gpu-flops", "-312T", "positive"),
                                     ("--mfu", "1.5", "(0, 1]"),
                                     ("--inter-latency", "-5us", "at least 0"),
                                     ("--bucket-size", "0", "positive"),
                                     ("--params", "1.5", "whole number"),
                                     ("--top", "0", "positive integer")):
            self.assertRefused(base + [option, value], "%s %s" % (option, value), words)

    def test_all_bad_inputs_reported_one_line_each(self):
        status, out, err = run_tool(["--model", "llama2-70b", "--ffn-hidden", "-28672",
                                     "--kv-heads", "0", "--micro-batch", "-1", "--nodes", "0",
                                     "--gpus-per-node", "8", "--gpu-mem", "-1GB"])
        self.assertEqual(status, 2, err)
        named = ["--ffn-hidden -28672", "--kv-heads 0", "--micro-batch -1", "--nodes 0",
                 "--gpu-mem -1GB"]
        self.assertEqual(len(err), len(named), err)
        for option, line in zip(named, err):
            self.assertIn(option, line)

    def test_a_relation_is_reported_beside_a_bad_value(self):
        # --kv-heads 3 is a positive integer, wrong only against the 64 heads; --hidden -5 is
        # wrong on its own, and the heads are not judged against it.
        status, _, err = run_tool(["--model", "llama2-70b", "--kv-heads", "3", "--hidden", "-5"]
                                  + CLUSTER)
        self.assertEqual(status, 2)
        self.assertEqual(len(err), 2, err)
        self.assertIn("--hidden -5", err[0])
        self.assertIn("--kv-heads 3: does not divide --heads 64", err[1])


class Published(unittest.TestCase):
    def plan(self, args):
        status, out, err = run_tool(args + ["--json", "--top", "100"])
        self.assertEqual(status, 0, err)
        return json.loads(out)

    def test_megatron_gpt3_175b_example_fits_by_default(self):
        doc = self.plan(GPT3_EXAMPLE)
        self.assertEqual(doc["training"]["attention"], "flash")
        r = layout(doc, 8, 16)
        self.assertIsNotNone(r, [x["reason"] for x in doc["rejected"]
                                 if (x["tp"], x["pp"]) == (8, 16)])
        self.assertLessEqual(r["memory"]["peak"], 80e9)
        megatron = megatron_gpt3_example_bytes()
        self.assertAlmostEqual(megatron / MIB, 56531, delta=1)   # Megatron prints MB = MiB
        self.assertLessEqual(abs(r["memory"]["peak"] - megatron) / megatron, 0.15,
                             (r["memory"]["peak"], megatron))
        self.assertEqual(r["memory"]["peak_stage"], 0)

    def test_standard_attention_does_not_fit_the_example(self):
        doc = self.plan(GPT3_EXAMPLE + ["--attention", "standard"])
        self.assertIsNone(layout(doc, 8, 16))
        why = [x["reason"] for x in doc["rejected"] if (x["tp"], x["pp"]) == (8, 16)]
        self.assertIn("> 80.0 GB", why[0])

    def test_nemo_llama2_70b_recipe_fits(self):
        doc = self.plan(LLAMA2_RECIPE)
        r = layout(doc, 4, 4)
        self.assertIsNotNone(r)
        self.assertEqual((r["dp"], r["micro_batches"]), (64, 32))
        self.assertLessEqual(r["memory"]["peak"], 80e9)


def main():
    global TOOL
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", default=TOOL, help="the coll-plan script to run")
    args, rest = parser.parse_known_args()
    TOOL = args.tool
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
