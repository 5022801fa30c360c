#!/usr/bin/env python3
"""coll-plan, the parallelism planner (ctest -L parallel3d).

Checks, each against numbers computed by hand here from the published formulas:
  - the enumeration: every (tp, pp, dp) of 8 and 12 GPUs, and which of them a small transformer
    or MLP can run (tp dividing heads and hidden, pp dividing layers, dp dividing the
    micro-batches), with the reason for each rejected one;
  - the rank groups in Megatron-LM's order tp-dp-pp (its parallel_state docstring example) and in
    another order, and which groups cross nodes;
  - each memory formula: bytes per parameter (Megatron-Core's table, the ZeRO paper's), the
    activations of a GPT-2 small layer in every Korthikanti et al. 2022 Table 2 case, a whole
    GPU's memory, the pipeline's in-flight micro-batches, an MLP's memory;
  - the cost model: ring allreduce, the bubble, one step;
  - the question every team asks: 4 servers x 8 A100 80GB, a 70B model, bf16 with Adam;
  - published figures: the ZeRO paper's model states of a 7.5B model on 64 GPUs, Korthikanti et
    al.'s activation savings for GPT-3 175B and MT-NLG 530B, within 15%;
  - the command line: units, JSON, exit status.
"""

import argparse
import json
import os
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
TOOLS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                      "..", "tools"))
sys.path.insert(0, TOOLS)

from plan import units  # noqa: E402
from plan.comm import allreduce_time, dimension_links, rank_groups  # noqa: E402
from plan.config import Cluster, Layout, Training  # noqa: E402
from plan.memory import (activation_terms, in_flight, interleave_factor,  # noqa: E402
                         layer_activation_bytes, model_state_bytes, stage_memory, state_bytes)
from plan.model import MLP, PRESETS, Transformer, flops_per_token, param_count  # noqa: E402
from plan.planner import estimate, factorizations  # noqa: E402

TOOL = os.path.join(TOOLS, "coll-plan")
GPT2 = Transformer(**PRESETS["gpt2-small"])
S, H, A, V = 1024, 768, 12, 50257          # GPT-2 small: seq, hidden, heads, vocabulary
SBH = S * H                                # s*b*h for a micro-batch of one sequence
TEAM_QUESTION = ["--params", "70e9", "--nodes", "4", "--gpus-per-node", "8", "--gpu-mem", "80GB",
                 "--intra-bw", "600GB/s", "--inter-bw", "200Gbit", "--precision", "bf16",
                 "--optimizer", "adam"]


def run_tool(args):
    """(exit status, stdout, stderr) of coll-plan."""
    p = subprocess.run([sys.executable, TOOL] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def small_transformer(heads=4, layers=2):
    return Transformer(layers=layers, hidden=64, heads=heads, seq=16, vocab=128)


def statuses(model, train, gpus):
    cluster = Cluster(nodes=1, gpus_per_node=gpus, gpu_mem=1e15)
    return {tuple(estimate(model, train, cluster, l)[k] for k in ("tp", "pp", "dp")):
            estimate(model, train, cluster, l) for l in factorizations(gpus)}


class Enumeration(unittest.TestCase):
    def test_every_factorization_of_8(self):
        self.assertEqual(factorizations(8), [
            (1, 1, 8), (1, 2, 4), (1, 4, 2), (1, 8, 1), (2, 1, 4), (2, 2, 2), (2, 4, 1),
            (4, 1, 2), (4, 2, 1), (8, 1, 1)])

    def test_every_factorization_of_12(self):
        expected = {(1, 1, 12), (1, 2, 6), (1, 3, 4), (1, 4, 3), (1, 6, 2), (1, 12, 1),
                    (2, 1, 6), (2, 2, 3), (2, 3, 2), (2, 6, 1), (3, 1, 4), (3, 2, 2), (3, 4, 1),
                    (4, 1, 3), (4, 3, 1), (6, 1, 2), (6, 2, 1), (12, 1, 1)}
        self.assertEqual(set(factorizations(12)), expected)
        self.assertEqual(len(factorizations(12)), 18)

    def test_tp_divides_heads_pp_divides_layers(self):
        # 4 heads, 2 layers, global batch 8 of micro-batch 1 on 8 GPUs: tp in {1, 2, 4},
        # pp in {1, 2}; every dp divides the 8 micro-batches.
        got = statuses(small_transformer(), Training(global_batch=8), 8)
        ok = {k for k, r in got.items() if r["status"] == "ok"}
        self.assertEqual(ok, {(1, 1, 8), (1, 2, 4), (2, 1, 4), (2, 2, 2), (4, 1, 2), (4, 2, 1)})
        self.assertIn("pp=4 does not divide the 2 layers", got[(1, 4, 2)]["reason"])
        self.assertIn("pp=8 does not divide the 2 layers", got[(1, 8, 1)]["reason"])
        self.assertIn("tp=8 does not divide the 4 heads", got[(8, 1, 1)]["reason"])

    def test_dp_divides_the_micro_batches(self):
        # Global batch 6, micro-batch 1: 6 micro-batches; dp=4 cannot split them.
        got = statuses(small_transformer(layers=4), Training(global_batch=6), 4)
        ok = {k for k, r in got.items() if r["status"] == "ok"}
        self.assertEqual(ok, {(1, 2, 2), (1, 4, 1), (2, 1, 2), (2, 2, 1), (4, 1, 1)})
        self.assertIn("dp=4 does not divide the 6 micro-batches", got[(1, 1, 4)]["reason"])

    def test_kv_heads_limit_tp(self):
        gqa = Transformer(layers=2, hidden=64, heads=8, kv_heads=2, seq=16, vocab=128)
        got = statuses(gqa, Training(global_batch=8), 4)
        self.assertEqual(got[(2, 1, 2)]["status"], "ok")
        self.assertIn("tp=4 does not divide the 2 KV heads", got[(4, 1, 1)]["reason"])

    def test_mlp_layouts(self):
        # 784x8x6x10: 3 layers. pp=4 has a stage without a layer. tp pairs a column-parallel
        # layer with a row-parallel one inside a stage: tp=4 on one stage pairs layers 0 and 1
        # (width 8 splits in 4); on 2 stages (layers [0] and [1, 2]) it pairs 1 and 2 (width 6
        # does not split in 4).
        model = MLP(widths=(784, 8, 6, 10))
        got = statuses(model, Training(global_batch=8, micro_batch=0, micro_batches=1), 4)
        ok = {k for k, r in got.items() if r["status"] == "ok"}
        self.assertEqual(ok, {(1, 1, 4), (1, 2, 2), (2, 1, 2), (2, 2, 1), (4, 1, 1)})
        self.assertIn("pp=4 exceeds the 3 layers", got[(1, 4, 1)]["reason"])
        got = statuses(model, Training(global_batch=8, micro_batch=0, micro_batches=1), 8)
        self.assertIn("tp=4 does not divide the width 6", got[(4, 2, 1)]["reason"])


class Groups(unittest.TestCase):
    def test_megatron_docstring_example(self):
        # megatron/core/parallel_state.py: 16 GPUs, tp=2, pp=4 (so dp=2), order tp-dp-pp.
        layout = Layout(tp=2, pp=4, dp=2)
        self.assertEqual(rank_groups(layout, "tp-dp-pp", "tp"),
                         [[2 * i, 2 * i + 1] for i in range(8)])
        self.assertEqual(rank_groups(layout, "tp-dp-pp", "dp"),
                         [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]])
        self.assertEqual(rank_groups(layout, "tp-dp-pp", "pp"),
                         [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]])

    def test_other_order(self):
        # tp-pp-dp: rank = tp + 2 pp + 4 dp.
        layout = Layout(tp=2, pp=2, dp=2)
        self.assertEqual(rank_groups(layout, "tp-pp-dp", "tp"), [[0, 1], [2, 3], [4, 5], [6, 7]])
        self.assertEqual(rank_groups(layout, "tp-pp-dp", "pp"), [[0, 2], [1, 3], [4, 6], [5, 7]])
        self.assertEqual(rank_groups(layout, "tp-pp-dp", "dp"), [[0, 4], [1, 5], [2, 6], [3, 7]])

    def test_which_groups_cross_nodes(self):
        layout = Layout(tp=2, pp=2, dp=2)
        links = dimension_links(layout, Cluster(nodes=2, gpus_per_node=4))
        self.assertEqual([links[d]["link"] for d in ("tp", "dp", "pp")],
                         ["intra", "intra", "inter"])
        links = dimension_links(layout, Cluster(nodes=4, gpus_per_node=2))
        self.assertEqual([links[d]["link"] for d in ("tp", "dp", "pp")],
                         ["intra", "inter", "inter"])
        self.assertEqual(links["dp"]["crossing"], 4)
        links = dimension_links(Layout(tp=1, pp=1, dp=8), Cluster(nodes=1, gpus_per_node=8))
        self.assertEqual(links["tp"]["link"], "none")


class MemoryFormulas(unittest.TestCase):
    def test_gpt2_small_parameters(self):
        # 12 layers of 12h^2 + 13h, word and position embeddings, final LayerNorm: 124,439,808.
        self.assertEqual(param_count(GPT2), 12 * (12 * H * H + 13 * H) + V * H + S * H + 2 * H)
        self.assertEqual(param_count(GPT2), 124439808)

    def test_llama2_70b_parameters(self):
        self.assertAlmostEqual(param_count(Transformer(**PRESETS["llama2-70b"])) / 1e9, 68.98,
                               places=2)

    def test_bytes_per_parameter(self):
        # Megatron-Core distributed optimizer guide: 18 = 6 + 12/d, 20 = 4 + 16/d, 16 = 8 + 8/d.
        for precision, total, sharded in (("bf16", 18, 12), ("fp16", 20, 16), ("fp32", 16, 8)):
            w, g, o = state_bytes(precision, "adam", "megatron")
            self.assertEqual((w + g + o, o), (total, sharded))
            states = model_state_bytes(1000, precision, "adam", "megatron", 1, 8)
            self.assertAlmostEqual(sum(states.values()), 1000 * (total - sharded + sharded / 8))
        # ZeRO paper Sec 3.1: 2 + 2 + K, K = 12 for mixed-precision Adam.
        self.assertEqual(state_bytes("fp16", "adam", "zero"), (2, 2, 12))
        # SGD with momentum in fp32 (coll-train): weights, gradients, momentum.
        self.assertEqual(state_bytes("fp32", "sgd"), (4, 4, 4))

    def test_activation_terms_are_korthikanti_eq1(self):
        self.assertEqual(activation_terms(GPT2, 2), (10, 24, 5))      # 34 + 5as/h
        self.assertEqual(activation_terms(GPT2, 4), (18, 48, 9))      # fp32 elements

    def test_layer_activations_table2(self):
        # Standard attention, which stores the scores (Korthikanti et al. 2022's baseline).
        score = 5 * A * S / H                                         # 5as/h = 80
        cases = {("none", 1, False): SBH * (34 + score),               # Eq. 1
                 ("none", 2, False): SBH * (10 + 24 / 2 + score / 2),  # Eq. 2
                 ("none", 2, True): SBH / 2 * (34 + score),            # Eq. 4
                 ("selective", 2, False): SBH * (10 + 24 / 2),
                 ("selective", 2, True): SBH * 34 / 2,                 # Eq. 6
                 ("full", 1, False): 2 * SBH,
                 ("full", 2, True): 2 * SBH / 2}
        for (recompute, tp, sp), expected in cases.items():
            got = layer_activation_bytes(GPT2, 1, tp, sp, recompute, 2, "standard")
            self.assertAlmostEqual(got, expected, msg=(recompute, tp, sp))
        self.assertEqual(layer_activation_bytes(GPT2, 1, 1, False, "none", 2, "standard"),
                         89653248)

    def test_flash_attention_stores_no_scores(self):
        # FlashAttention (Dao et al. 2022) recomputes the scores in backward: the 5as/h term is
        # gone whatever the recomputation, which then changes nothing more (selective drops only
        # that term); the default is flash.
        cases = {(1, False): SBH * 34, (2, False): SBH * (10 + 24 / 2), (2, True): SBH / 2 * 34}
        for (tp, sp), expected in cases.items():
            for recompute in ("none", "selective"):
                got = layer_activation_bytes(GPT2, 1, tp, sp, recompute, 2)
                self.assertAlmostEqual(got, expected, msg=(recompute, tp, sp))
        self.assertEqual(Training(global_batch=1).attention, "flash")

    def test_one_gpu_of_gpt2_small(self):
        # tp=pp=dp=1, micro-batch 4, bf16, Adam: 18 bytes per parameter; 12 layers of
        # 4 sbh (34 + 5as/h); the embedding dropout mask 4 sbh (1 byte); the output layer
        # 4 * 4sbh (1 + v/h) (Korthikanti et al. 2022 Sec 4.3).
        train = Training(global_batch=4, micro_batch=4, attention="standard")
        got = stage_memory(GPT2, train, Cluster(1, 1), Layout(1, 1, 1), 0, 4, 1)
        acts = 12 * 4 * SBH * 114 + 4 * SBH + 4 * 4 * SBH * (1 + V / H)
        self.assertEqual(got["weights"] + got["gradients"] + got["optimizer"], 124439808 * 18)
        self.assertAlmostEqual(got["activations"], acts)
        self.assertAlmostEqual(got["total"], 124439808 * 18 + acts)

    def test_pipeline_in_flight(self):
        # 1F1B: stage k holds min(p - k, m) micro-batches; the first stage p of them.
        self.assertEqual([in_flight(4, k, 8) for k in range(4)], [4, 3, 2, 1])
        self.assertEqual([in_flight(4, k, 2) for k in range(4)], [2, 2, 2, 1])
        self.assertEqual(interleave_factor(4, 2), 1 + 3 / 8)
        # pp=4 over 12 layers: stage 0 has 3 layers x 4 micro-batches = all 12 layers' worth.
        train = Training(global_batch=8, attention="standard")
        first = stage_memory(GPT2, train, Cluster(1, 4), Layout(1, 4, 1), 0, 1, 8)
        last = stage_memory(GPT2, train, Cluster(1, 4), Layout(1, 4, 1), 3, 1, 8)
        self.assertAlmostEqual(first["activation_parts"]["layers"], 12 * SBH * 114)
        self.assertAlmostEqual(last["activation_parts"]["layers"], 3 * SBH * 114)
        self.assertAlmostEqual(last["activation_parts"]["output"], 4 * SBH * (1 + V / H))

    def test_mlp_memory(self):
        # 784x1024x1024x10, fp32, SGD with momentum, tp=2 dp=1, 64 rows in one micro-batch:
        # layer 0 column-parallel (half its rows and bias), layer 1 row-parallel (half its
        # columns, all its bias), layer 2 whole on both ranks.
        model = MLP(widths=(784, 1024, 1024, 10))
        self.assertEqual(param_count(model), 1024 * 785 + 1024 * 1025 + 10 * 1025)
        train = Training(global_batch=64, micro_batch=0, micro_batches=1, precision="fp32",
                         optimizer="sgd")
        got = stage_memory(model, train, Cluster(1, 2, base_mem=50e6), Layout(2, 1, 1), 0, 64, 1)
        params = (1024 * 784 + 1024) / 2 + (1024 * 1024 / 2 + 1024) + (10 * 1024 + 10)
        self.assertAlmostEqual(got["params"], params)
        outputs = 512 + 1024 + 10
        # outputs, deltas, the input (one micro-batch in flight and one for evaluation) and the
        # column layer's input gradient (its backward allreduce)
        acts = 64 * outputs * 4 + 64 * outputs * 4 + 2 * 64 * 784 * 4 + 64 * 784 * 4
        self.assertAlmostEqual(got["activations"], acts)
        self.assertAlmostEqual(got["total"], params * 12 + acts + 50e6)
        # pp=2 tp=1, 4 micro-batches of 16 rows: stage 1 (layers 1 and 2, both whole) holds one
        # micro-batch in flight: its input and its input gradient, 16 x 1024 each.
        train = Training(global_batch=64, micro_batch=0, micro_batches=4, precision="fp32",
                         optimizer="sgd")
        got = stage_memory(model, train, Cluster(1, 2), Layout(1, 2, 1), 1, 16, 4)
        parts = got["activation_parts"]
        self.assertAlmostEqual(parts["layers"], 16 * (1024 + 10) * 4)
        self.assertAlmostEqual(parts["input"], 16 * 1024 * 4)
        self.assertAlmostEqual(parts["input_gradients"], 16 * 1024 * 4)
        first = stage_memory(model, train, Cluster(1, 2), Layout(1, 2, 1), 0, 16, 4)
        self.assertAlmostEqual(first["activation_parts"]["input"], 3 * 16 * 784 * 4)
        self.assertEqual(first["activation_parts"]["input_gradients"], 0)


class CostModel(unittest.TestCase):
    def test_ring_allreduce(self):
        self.assertAlmostEqual(allreduce_time(1e9, 4, 100e9, 0), 2 * 3 / 4 * 1e9 / 100e9)
        self.assertAlmostEqual(allreduce_time(1e9, 4, 100e9, 10e-6), 0.015 + 6 * 10e-6)
        self.assertEqual(allreduce_time(1e9, 1, 100e9, 1e-6), 0.0)

    def test_flops_gpt3_narayanan(self):
        # Narayanan et al. 2021 Sec 5.1, FLOPs per iteration (with activation recomputation)
        # per token: 96 l h^2 (1 + s/(6h) + V/(16 l h)).
        m = Transformer(**PRESETS["gpt3-175b"])
        l, h, s, v = 96, 12288, 2048, 51200
        published = 96 * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
        self.assertAlmostEqual(flops_per_token(m, "full")[1] / published, 1.0, places=9)

    def test_step_time_and_bubble(self):
        # GPT-2 small, tp=1 pp=4 dp=1, 8 micro-batches of one sequence, no latency: bubble
        # (p-1)/m = 3/8. A micro-batch on stage k takes its FLOPs / (peak x mfu) plus two sends
        # of s*b*h 16-bit activations (forward and backward); the last stage also runs the
        # logits. The step is m x the slowest stage + (p-1) x the mean stage.
        train = Training(global_batch=8)
        cluster = Cluster(nodes=1, gpus_per_node=4, gpu_mem=1e12, intra_latency=0)
        r = estimate(GPT2, train, cluster, Layout(1, 4, 1))
        self.assertEqual(r["bubble_fraction"], 3 / 8)
        layer = 3 * (2 * 12 * H * H + 4 * S * H)          # per token, forward and backward
        logits = 3 * 2 * H * V
        send = 2 * (SBH * 2 / 300e9)
        rate = 312e12 * 0.5
        stages = [S * 3 * layer / rate + send] * 3 + [S * (3 * layer + logits) / rate + send]
        t = r["time"]
        self.assertAlmostEqual(t["compute"] + t["pp"], 8 * stages[3])
        self.assertAlmostEqual(t["bubble"], 3 * sum(stages) / 4)
        self.assertAlmostEqual(t["step"], 8 * stages[3] + 3 * sum(stages) / 4)
        self.assertEqual((t["tp"], t["dp"]), (0, 0))


class TeamQuestion(unittest.TestCase):
    """4 servers x 8 A100 80GB, NVLink 600 GB/s inside, 200 Gbit/s between, 70B, bf16, Adam."""

    def plan_of(self, extra=()):
        status, out, err = run_tool(TEAM_QUESTION + list(extra) + ["--json", "--top", "30"])
        self.assertEqual(status, 0, err)
        return json.loads(out)

    def test_best_layouts_fit_with_tp_inside_a_server(self):
        doc = self.plan_of()
        layouts = doc["layouts"]
        self.assertGreaterEqual(len(layouts), 1)
        for r in layouts:
            self.assertLessEqual(r["memory"]["peak"], 80e9, r)
        best = layouts[0]
        self.assertLessEqual(best["tp"], 8)
        self.assertEqual(best["links"]["tp"]["link"], "intra")
        inside = [r["rank"] for r in layouts if r["tp"] <= 8]
        across = [r["rank"] for r in layouts if r["tp"] > 8]
        self.assertTrue(not across or max(inside) < min(across), layouts)
        text = " ".join(doc["explanation"])
        for words in ("tp=%d keeps the 4 allreduces per layer" % best["tp"], "inside a server",
                      "fits", "bubble", "Peak memory"):
            self.assertIn(words, text)

    def test_with_megatron_memory_savers_the_top_three_stay_in_a_server(self):
        doc = self.plan_of(["--sequence-parallel", "--recompute", "selective", "--zero", "1"])
        top = doc["layouts"][:3]
        self.assertEqual(len(top), 3)
        for r in top:
            self.assertLessEqual(r["memory"]["peak"], 80e9)
            self.assertLessEqual(r["tp"], 8)
            self.assertEqual(r["links"]["tp"]["link"], "intra")

    def test_text_output_explains(self):
        status, out, err = run_tool(TEAM_QUESTION)
        self.assertEqual(status, 0, err)
        self.assertIn("Why tp=", out)
        self.assertIn("keeps the 4 allreduces per layer and micro-batch", out)
        self.assertIn("shape assumed from --params", out)


class PublishedFigures(unittest.TestCase):
    """Estimates against published numbers, within 15%; docs/planner.md cites them."""

    def assertWithin15(self, got, published):
        self.assertLessEqual(abs(got - published) / published, 0.15, (got, published))

    def test_zero_paper_figure1(self):
        # Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, K = 12, Nd = 64, per device:
        # baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB.
        for stage, published in ((0, 120e9), (1, 31.4e9), (2, 16.6e9), (3, 1.9e9)):
            states = model_state_bytes(7.5e9, "fp16", "adam", "zero", stage, 64)
            self.assertWithin15(sum(states.values()), published)

    def test_korthikanti_selective_recomputation_savings(self):
        # Korthikanti et al. 2022 Sec 5: selective recomputation saves 70% of the activation
        # memory of GPT-3 175B and 65% of MT-NLG 530B's (a, h: 96, 12288 and 128, 20480;
        # s = 2048).
        for a, h, published in ((96, 12288, 0.70), (128, 20480, 0.65)):
            m = Transformer(layers=1, hidden=h, heads=a, seq=2048, vocab=51200)
            full = layer_activation_bytes(m, 1, 8, True, "none", 2, "standard")
            selective = layer_activation_bytes(m, 1, 8, True, "selective", 2, "standard")
            self.assertWithin15(1 - selective / full, published)

    def test_korthikanti_five_times_less(self):
        # Abstract: sequence parallelism with selective recomputation reduce activation memory
        # by 5x against tensor parallelism alone (Eq. 2 baseline); MT-NLG 530B at t = 8.
        m = Transformer(layers=105, hidden=20480, heads=128, seq=2048, vocab=51200)
        baseline = layer_activation_bytes(m, 1, 8, False, "none", 2, "standard")
        present = layer_activation_bytes(m, 1, 8, True, "selective", 2, "standard")
        self.assertWithin15(baseline / present, 5.0)


class CommandLine(unittest.TestCase):
    def test_units(self):
        self.assertEqual(units.parse_bandwidth("200Gbit"), 25e9)
        self.assertEqual(units.parse_bandwidth("200Gb/s"), 25e9)
        self.assertEqual(units.parse_bandwidth("600GB/s"), 600e9)
        self.assertEqual(units.parse_bandwidth("600"), 600e9)
        self.assertEqual(units.parse_bytes("80GiB"), 80 * 2 ** 30)
        self.assertEqual(units.parse_bytes("80"), 80e9)
        self.assertEqual(units.parse_flops("312T"), 312e12)
        self.assertEqual(units.parse_flops("312e12"), 312e12)
        self.assertAlmostEqual(units.parse_time("5us"), 5e-6)
        self.assertEqual(units.parse_count("70B"), 70e9)
        for parse, bad in ((units.parse_bytes, "80Gb"), (units.parse_flops, "312"),
                           (units.parse_time, "5"), (units.parse_bandwidth, "fast")):
            with self.assertRaises(units.UnitError):
                parse(bad)

    def test_exit_status(self):
        status, _, err = run_tool(["--params", "70e9", "--nodes", "1", "--gpus-per-node", "1"])
        self.assertEqual(status, 1, err)
        status, _, err = run_tool(["--params", "70e9", "--nodes", "1", "--gpus-per-node", "1",
                                   "--intra-bw", "fast"])
        self.assertEqual(status, 2)
        self.assertIn("expected a bandwidth", err)
        status, _, err = run_tool(["--nodes", "1", "--gpus-per-node", "1"])
        self.assertEqual(status, 2)
        self.assertIn("give --model", err)

    def test_mlp_json(self):
        status, out, err = run_tool(["--mlp", "784x1024x1024x1024x10", "--global-batch", "256",
                                     "--micro-batches", "4", "--nodes", "1",
                                     "--ranks-per-node", "4", "--mem", "4GB", "--flops", "50G",
                                     "--base-mem", "60MB", "--top", "10", "--json"])
        self.assertEqual(status, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["training"]["precision"], "fp32")
        self.assertEqual(doc["training"]["optimizer"], "sgd")
        got = {(r["tp"], r["pp"], r["dp"]) for r in doc["layouts"]}
        self.assertEqual(got, {(1, 1, 4), (1, 2, 2), (1, 4, 1), (2, 1, 2), (2, 2, 1), (4, 1, 1)})
        for r in doc["layouts"]:
            self.assertGreater(r["memory"]["peak"], 60e6)


def main():
    global TOOL
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", default=TOOL, help="the coll-plan script to run")
    args, rest = parser.parse_known_args()
    TOOL = args.tool
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
