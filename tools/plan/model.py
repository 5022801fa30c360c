"""The models the planner estimates: a decoder-only transformer (GPT or Llama style) and a plain
MLP; their parameter counts, FLOPs per token and pipeline stages.

Sources: the parameter count of a GPT layer, 12h^2 + 13h, and the FLOPs of a training iteration
are Narayanan et al. 2021 (arXiv 2104.04473) Sec 5.1, whose FLOPs per iteration (with activation
recomputation) is the full-recomputation case of flops_per_token(). docs/planner.md gives every
formula with its source.
"""

import math
from dataclasses import dataclass
from typing import Tuple

ARCHS = ("gpt", "llama")
HEAD_DIM_INFERRED = 128

# Published shapes. gpt2-small: Radford et al. 2019 (124M). gpt3-175b: Brown et al. 2020 Table
# 2.1, as Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh runs it (GPT-2 vocabulary
# padded to 51200). llama2-70b: Touvron et al. 2023. llama3-70b: NeMo's
# nemo/collections/llm/recipes/llama3_70b.py (Llama3Config70B, seq 8192).
PRESETS = {
    "gpt2-small": dict(layers=12, hidden=768, heads=12, seq=1024, vocab=50257, arch="gpt"),
    "gpt3-175b": dict(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200, arch="gpt"),
    "llama2-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672,
                       seq=4096, vocab=32000, arch="llama"),
    "llama3-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672,
                       seq=8192, vocab=128256, arch="llama"),
}


@dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer.

    gpt: GeLU MLP of ffn_hidden (default 4h), LayerNorm with biases, learned positions, dropout,
    word embeddings tied to the output layer (Megatron-LM's GPT). llama: SwiGLU MLP (three
    matrices), RMSNorm, no biases, rotary positions, no dropout, an untied output layer.
    params > 0 is a total given with --params: the layers are scaled to reach it.
    """
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    ffn_hidden: int = 0
    kv_heads: int = 0
    arch: str = "gpt"
    params: int = 0
    shape_note: str = ""
    kind = "transformer"

    @property
    def ffn(self):
        return self.ffn_hidden or 4 * self.hidden

    @property
    def kv(self):
        return self.kv_heads or self.heads

    @property
    def gated(self):
        return self.arch == "llama"

    @property
    def dropout(self):
        return self.arch == "gpt"

    @property
    def tied(self):
        return self.arch == "gpt"


@dataclass(frozen=True)
class MLP:
    """A plain MLP: widths[0] inputs, fully connected layers with ReLU between them, widths[-1]
    outputs (coll-train's model). Layer l has a widths[l+1] x widths[l] weight and a bias."""
    widths: Tuple[int, ...]
    kind = "mlp"

    @property
    def layers(self):
        return len(self.widths) - 1


def model_problems(model):
    """The messages of everything that makes the shape impossible, one per problem (empty when
    it is consistent); the numbers are positive already (inputs.py)."""
    if model.kind == "mlp":
        if len(model.widths) < 2 or min(model.widths) < 1:
            return ["--mlp %s: an MLP needs at least two widths >= 1, e.g. 784x1024x10"
                    % "x".join(map(str, model.widths))]
        return []
    problems = ["--%s %d: must be at least 1" % (name.replace("_", "-"), getattr(model, name))
                for name in ("layers", "hidden", "heads", "seq", "vocab")
                if getattr(model, name) < 1]
    if model.arch not in ARCHS:
        problems.append("--arch %s: must be one of %s" % (model.arch, ", ".join(ARCHS)))
    if problems:
        return problems
    if model.hidden % model.heads:
        problems.append("--heads %d: does not divide --hidden %d" % (model.heads, model.hidden))
    if model.heads % model.kv:
        problems.append("--kv-heads %d: does not divide --heads %d" % (model.kv, model.heads))
    return problems


def attention_matmul_weights(model):
    d = model.hidden // model.heads
    return model.hidden * (model.hidden + 2 * model.kv * d) + model.hidden * model.hidden


def mlp_matmul_weights(model):
    return (3 if model.gated else 2) * model.hidden * model.ffn


def layer_weights(model):
    """(split, replicated) parameters of one layer, unscaled: split are those tensor parallelism
    divides (the column- and row-parallel matrices and the column-parallel biases), replicated
    those every tp rank holds whole (norms, the row-parallel biases). GPT with ffn 4h and
    multi-head attention: 12h^2 + 13h in all (Narayanan et al. 2021 Sec 5.1)."""
    h = model.hidden
    split = attention_matmul_weights(model) + mlp_matmul_weights(model)
    if model.arch == "gpt":
        split += h + 2 * model.kv * (h // model.heads) + model.ffn  # QKV and fc1 biases
        return split, 2 * h + 2 * 2 * h  # proj and fc2 biases; two LayerNorms, weight and bias
    return split, 2 * h  # two RMSNorm weights


def embedding_weights(model):
    """(word embedding V x h, learned positions s x h or 0)."""
    return model.vocab * model.hidden, (model.seq * model.hidden if model.arch == "gpt" else 0)


def final_norm_weights(model):
    return 2 * model.hidden if model.arch == "gpt" else model.hidden


def outside_layers_weights(model):
    """Parameters outside the transformer layers: embeddings, final norm, untied output layer."""
    vocab, positions = embedding_weights(model)
    return vocab + positions + final_norm_weights(model) + (0 if model.tied else vocab)


def shape_params(model):
    split, replicated = layer_weights(model)
    return model.layers * (split + replicated) + outside_layers_weights(model)


def layer_scale(model):
    """Factor on every layer's parameters that makes the total --params (1.0 without it)."""
    if model.kind == "mlp" or not model.params:
        return 1.0
    split, replicated = layer_weights(model)
    rest = model.params - outside_layers_weights(model)
    if rest <= 0:
        raise ValueError("--params %d is smaller than the embeddings of the shape" % model.params)
    return rest / (model.layers * (split + replicated))


def mlp_layer_weights(model, layer):
    """(weight count, bias count) of one MLP layer."""
    return model.widths[layer + 1] * model.widths[layer], model.widths[layer + 1]


def param_count(model):
    if model.kind == "mlp":
        return sum(sum(mlp_layer_weights(model, l)) for l in range(model.layers))
    return model.params or shape_params(model)


def layer_flops_per_token(model, recompute="none"):
    """Hardware FLOPs of one transformer layer for one token, forward and backward.

    A layer's forward is 2 FLOPs per matmul weight plus 4sh for the attention scores (QK^T and
    attention over V); backward is twice forward (Narayanan et al. 2021 Sec 5.1). Recomputation
    runs again what it discarded: full recomputation the whole forward, selective only the
    attention scores (Korthikanti et al. 2022 Sec 5).
    """
    matmul = (attention_matmul_weights(model) + mlp_matmul_weights(model)) * layer_scale(model)
    forward = 2.0 * matmul + 4.0 * model.seq * model.hidden
    again = {"none": 0.0, "selective": 4.0 * model.seq * model.hidden, "full": forward}
    return 3.0 * forward + again[recompute]


def logits_flops_per_token(model):
    """FLOPs of the output layer for one token, forward (2hV) and backward."""
    return 3.0 * 2.0 * model.hidden * model.vocab


def flops_per_token(model, recompute="none"):
    """(model FLOPs, hardware FLOPs) of one token (one sample for an MLP), forward and backward;
    model FLOPs leave recomputation out. For GPT with full recomputation this is Narayanan et
    al. 2021 Sec 5.1's FLOPs per iteration divided by its B*s tokens: 96lh^2 (1 + s/(6h) +
    V/(16lh)). An MLP: 6 FLOPs per weight (2 forward, 4 backward)."""
    if model.kind == "mlp":
        weights = sum(mlp_layer_weights(model, l)[0] for l in range(model.layers))
        return 6.0 * weights, 6.0 * weights
    logits = logits_flops_per_token(model)
    return (model.layers * layer_flops_per_token(model) + logits,
            model.layers * layer_flops_per_token(model, recompute) + logits)


def stage_layer_range(model, pp, stage):
    """range() of the layers of pipeline stage `stage` of `pp`: contiguous, L/pp each when pp
    divides L, else the first stages get one fewer (k*L//pp .. (k+1)*L//pp)."""
    return range(stage * model.layers // pp, (stage + 1) * model.layers // pp)


def mlp_tp_roles(model, layers, tp):
    """[(layer, role)] for the layers of one stage under tensor parallelism tp: Megatron's pairing,
    a column-parallel layer then a row-parallel one ('col', 'row'); a layer left without a partner
    at the end of the stage, and every layer when tp is 1, runs whole on every tp rank."""
    layers = list(layers)
    roles = []
    for i, layer in enumerate(layers):
        if tp == 1 or (i % 2 == 0 and i + 1 == len(layers)):
            roles.append((layer, "whole"))
        else:
            roles.append((layer, "col" if i % 2 == 0 else "row"))
    return roles


def infer_shape(params, seq, vocab):
    """A GPT shape of about `params` parameters, for --params without a shape: hidden a multiple
    of 1024 with heads of 128, layers a multiple of 8 (so that pp can be 2, 4 or 8), hidden/layers
    between 64 and 256 (GPT-3 and Megatron-LM's published shapes lie in 96..200). Of the shapes
    within 5% of `params`, the one whose ratio is nearest GPT-3 175B's 128; else the nearest."""
    best, best_key = None, None
    for hidden in range(1024, 65536 + 1, 1024):
        for layers in range(8, 512 + 1, 8):
            if not 64 <= hidden / layers <= 256:
                continue
            shape = Transformer(layers=layers, hidden=hidden, heads=hidden // HEAD_DIM_INFERRED,
                                seq=seq, vocab=vocab)
            error = abs(shape_params(shape) - params) / params
            key = (0.0 if error <= 0.05 else error, abs(math.log(hidden / layers / 128.0)))
            if best_key is None or key < best_key:
                best, best_key = shape, key
    if best is None or best_key[0] > 0.25:
        raise ValueError("no GPT shape of about %d parameters: give --layers, --hidden and --heads"
                         % params)
    return best
