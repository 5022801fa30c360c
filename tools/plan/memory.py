"""Memory per GPU: model states (parameters, gradients, optimizer state, with ZeRO sharding) and
activations (Korthikanti et al. 2022), for each pipeline stage of a layout.

Every function returns bytes. docs/planner.md gives each formula with its paper and equation.
"""

from .config import element_bytes
from .model import (embedding_weights, final_norm_weights, layer_scale, layer_weights,
                    mlp_layer_weights, mlp_tp_roles, stage_layer_range)


def state_bytes(precision, optimizer, accounting="megatron"):
    """(weights, gradients, optimizer state) bytes per parameter.

    megatron, the Megatron-Core distributed optimizer guide's table (18 = 6 + 12/d for bf16
    weights with fp32 gradients, 20 = 4 + 16/d for fp16, 16 = 8 + 8/d for fp32): the optimizer
    state is the fp32 master weights (mixed precision), for fp16 an fp32 copy of the gradients
    too, and Adam's two moments. zero, Rajbhandari et al. 2020 Sec 3.1: 2 + 2 + K with K = 12 for
    mixed-precision Adam. SGD keeps one fp32 momentum per parameter instead of Adam's two.
    """
    moments = 8 if optimizer == "adam" else 4
    if precision == "fp32":
        return 4, 4, moments
    if accounting == "zero":
        return 2, 2, 4 + moments
    if precision == "bf16":
        return 2, 4, 4 + moments
    return 2, 2, 4 + 4 + moments


def model_state_bytes(params, precision, optimizer, accounting, zero, dp):
    """{'weights', 'gradients', 'optimizer'} bytes of `params` parameters on one GPU under ZeRO
    stage `zero` over dp replicas (Rajbhandari et al. 2020 Sec 5: stage 1 shards the optimizer
    state, stage 2 the gradients too, stage 3 the weights too). Stage 1 is Megatron's distributed
    optimizer."""
    weights, grads, opt = state_bytes(precision, optimizer, accounting)
    return {"weights": params * (weights / dp if zero >= 3 else weights),
            "gradients": params * (grads / dp if zero >= 2 else grads),
            "optimizer": params * (opt / dp if zero >= 1 else opt)}


def activation_terms(model, elem):
    """(replicated, split, scores): bytes per s*b*h of what one transformer layer stores for its
    backward, itemized as Korthikanti et al. 2022 Sec 4.1 with `elem`-byte elements and 1-byte
    dropout masks. replicated is what tensor parallelism leaves whole on every tp rank (the inputs
    of QKV and of the first MLP matrix, the two norm inputs, the dropout masks after attention
    and MLP); split what it divides (Q, K, V, the projection input, the MLP hidden activations);
    scores, per a*s/h, the softmax output, its dropout mask and output. GPT in 16 bits: 10, 24
    and 5, i.e. sbh(34 + 5as/h) (Eq. 1). K and V scale with kv_heads/heads, the MLP terms with
    ffn/h; a gated MLP stores three ffn-wide tensors, not two; without dropout, no masks."""
    mask = 1 if model.dropout else 0
    kv_ratio = model.kv / model.heads
    ffn_ratio = model.ffn / model.hidden
    replicated = 2 * elem + 2 * elem + 2 * mask
    split = elem * (1 + 2 * kv_ratio) + elem + (3 if model.gated else 2) * elem * ffn_ratio
    scores = elem + (mask + elem if model.dropout else 0)
    return replicated, split, scores


def layer_activation_bytes(model, micro_batch, tp, sp, recompute, elem, attention="flash"):
    """Bytes one transformer layer stores for one micro-batch (Korthikanti et al. 2022 Table 2):
    sbh(10 + 24/t + 5as/(ht)) with tp t (Eq. 2), sbh/t (34 + 5as/h) with sequence parallelism
    (Eq. 4); selective recomputation drops the 5as/h term (34sbh/t with both, Eq. 6); full
    recomputation keeps the layer input, 2sbh (divided by t under sequence parallelism, where
    the input is split along the sequence). The 5as/h term is that of standard attention:
    FlashAttention (Dao et al. 2022) never stores the scores, it recomputes them blockwise in the
    backward pass, so with attention "flash" the term is 0 whatever the recomputation."""
    sbh = float(model.seq) * micro_batch * model.hidden
    if recompute == "full":
        return sbh * elem / (tp if sp else 1)
    replicated, split, scores = activation_terms(model, elem)
    stored = recompute != "selective" and attention == "standard"
    score = scores * model.heads * model.seq / model.hidden if stored else 0.0
    if sp:
        return sbh / tp * (replicated + split + score)
    return sbh * (replicated + (split + score) / tp)


def in_flight(pp, stage, micro_batches):
    """Micro-batches whose activations pipeline stage `stage` holds at once under 1F1B:
    min(pp - stage, m); the first stage holds pp of them (Narayanan et al. 2021 Sec 2.2.1,
    Korthikanti et al. 2022 Sec 4.2.3)."""
    return min(pp - stage, micro_batches)


def interleave_factor(pp, virtual_stages):
    """The interleaved schedule's extra activation memory, 1 + (p-1)/(p v) (Korthikanti et al.
    2022 Sec 4.2.3); 1 without interleaving."""
    return 1.0 + (pp - 1.0) / (pp * virtual_stages) if virtual_stages > 1 else 1.0


def transformer_stage_params(model, layout, stage):
    """Parameters one tp rank of pipeline stage `stage` holds: its layers' split parameters / tp
    and replicated ones; the word embedding / tp (vocabulary-parallel) and positions on the first
    stage; the final norm and the output layer / tp on the last (with pp > 1 Megatron keeps a
    copy of tied embeddings there, so it counts there too)."""
    split, replicated = layer_weights(model)
    layers = len(stage_layer_range(model, layout.pp, stage))
    n = layers * (split / layout.tp + replicated) * layer_scale(model)
    vocab, positions = embedding_weights(model)
    if stage == 0:
        n += vocab / layout.tp + positions
    if stage == layout.pp - 1:
        n += final_norm_weights(model)
        if not model.tied or layout.pp > 1:
            n += vocab / layout.tp
    return n


def transformer_stage_activations(model, train, layout, stage, micro_batch, micro_batches):
    """{'layers', 'embedding', 'output', 'recompute'}: activation bytes of one GPU of a stage.
    The layers hold in_flight() micro-batches; the first stage adds the embedding dropout mask of
    each (sbh, /t with sequence parallelism), the last the inputs of the final norm and of the
    output layer and the fp32 logits, 4sbh/t (1 + v/h) in 16 bits (Korthikanti et al. 2022
    Sec 4.3). Full recomputation adds the one layer it rematerialises during backward."""
    elem = element_bytes(train.precision)
    tp, sp = layout.tp, train.sequence_parallel
    sbh = float(model.seq) * micro_batch * model.hidden
    held = in_flight(layout.pp, stage, micro_batches)
    per_layer = layer_activation_bytes(model, micro_batch, tp, sp, train.recompute, elem,
                                       train.attention)
    layers = len(stage_layer_range(model, layout.pp, stage))
    parts = {"layers": layers * per_layer * held *
             interleave_factor(layout.pp, train.virtual_stages),
             "embedding": 0.0, "output": 0.0, "recompute": 0.0}
    if stage == 0 and model.dropout:
        parts["embedding"] = held * sbh / (tp if sp else 1)
    if stage == layout.pp - 1:
        parts["output"] = (2 * elem * sbh / (tp if sp else 1) +
                           4.0 * model.seq * micro_batch * model.vocab / tp)
    if train.recompute == "full":
        parts["recompute"] = layer_activation_bytes(model, micro_batch, tp, sp, "none", elem,
                                                    train.attention)
    return parts


def mlp_local_layer(model, layer, role, tp):
    """(parameters, output width) of one MLP layer on one tp rank: a column-parallel layer keeps
    out/tp rows of its weight and bias and produces out/tp features; a row-parallel one in/tp
    columns and the whole bias, producing all out features after its allreduce."""
    weights, bias = mlp_layer_weights(model, layer)
    if role == "col":
        return (weights + bias) / tp, model.widths[layer + 1] / tp
    if role == "row":
        return weights / tp + bias, model.widths[layer + 1]
    return weights + bias, model.widths[layer + 1]


def mlp_stage_roles(model, layout, stage):
    return mlp_tp_roles(model, stage_layer_range(model, layout.pp, stage), layout.tp)


def mlp_stage_params(model, layout, stage):
    return sum(mlp_local_layer(model, l, role, layout.tp)[0]
               for l, role in mlp_stage_roles(model, layout, stage))


def mlp_stage_activations(model, train, layout, stage, micro_batch, micro_batches):
    """{'layers', 'gradients', 'input', 'input_gradients'}: activation bytes of one rank of an
    MLP stage, as coll-train's 3D trainer holds them (examples/train/pipe.c). Each layer keeps its
    output for backward (in_flight() micro-batches of micro_batch rows) and one micro-batch of
    output gradients (its act and delta buffers); every stage keeps its input per micro-batch in
    flight (the first stage one more, for evaluation); a later stage also keeps the gradient of
    its input per micro-batch in flight (sent to the previous stage), the first stage one
    micro-batch of it when its first layer is column-parallel (that gradient's allreduce)."""
    elem = element_bytes(train.precision)
    roles = mlp_stage_roles(model, layout, stage)
    width = sum(mlp_local_layer(model, l, role, layout.tp)[1] for l, role in roles)
    held = in_flight(layout.pp, stage, micro_batches)
    row_in = micro_batch * model.widths[roles[0][0]] * elem
    if stage == 0:
        grads_in = row_in if roles[0][1] == "col" else 0.0
    else:
        grads_in = held * row_in
    return {"layers": held * micro_batch * width * elem,
            "gradients": micro_batch * width * elem,
            "input": (held + (1 if stage == 0 else 0)) * row_in,
            "input_gradients": grads_in}


def stage_memory(model, train, cluster, layout, stage, micro_batch, micro_batches):
    """Itemized bytes on one GPU of pipeline stage `stage`: 'params' (count), 'weights',
    'gradients', 'optimizer', 'activations' (and their parts), 'base', 'total'."""
    if model.kind == "mlp":
        params = mlp_stage_params(model, layout, stage)
        acts = mlp_stage_activations(model, train, layout, stage, micro_batch, micro_batches)
    else:
        params = transformer_stage_params(model, layout, stage)
        acts = transformer_stage_activations(model, train, layout, stage, micro_batch,
                                             micro_batches)
    out = {"stage": stage, "params": params}
    out.update(model_state_bytes(params, train.precision, train.optimizer, train.accounting,
                                 train.zero, layout.dp))
    out["activations"] = sum(acts.values())
    out["activation_parts"] = acts
    out["base"] = cluster.base_mem
    out["total"] = (out["weights"] + out["gradients"] + out["optimizer"] + out["activations"] +
                    out["base"])
    return out
