"""The planner: every (tp, pp, dp) of a cluster, whether it is possible, its memory per GPU, its
time per iteration, and the ranking of those that fit.

Time of one iteration (Narayanan et al. 2021 Sec 2.2 and 3): each GPU runs its m micro-batches
through the 1F1B schedule; one micro-batch on stage k takes t_k = compute + tensor-parallel
allreduces + pipeline sends, so the pipeline takes m * max(t_k) + (p-1)/v * mean(t_k) (the
bubble, (p-1)/(v m) of the ideal time), and the data-parallel gradient reduction follows after
the pipeline's flush, not overlapped with compute.
"""

import math

from .comm import (all_gather_time, allreduce_time, dimension_links, link_speed, p2p_time,
                   reduce_scatter_time)
from .config import Layout, element_bytes
from .memory import mlp_local_layer, mlp_stage_roles, stage_memory, state_bytes
from .model import (flops_per_token, layer_flops_per_token, logits_flops_per_token,
                    mlp_layer_weights, stage_layer_range)
from .units import fmt_bytes


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def factorizations(gpus):
    """Every Layout(tp, pp, dp) with tp * pp * dp = gpus, by tp then pp."""
    return [Layout(tp, pp, gpus // tp // pp) for tp in divisors(gpus)
            for pp in divisors(gpus // tp)]


def micro_batching(train, dp):
    """(micro_batch, micro_batches per replica), or (None, reason) when dp does not split the
    global batch into whole micro-batches."""
    if train.micro_batches:
        rows, rest = divmod(train.global_batch, dp * train.micro_batches)
        if rest or rows < 1:
            return None, ("dp=%d x %d micro-batches does not divide the global batch of %d"
                          % (dp, train.micro_batches, train.global_batch))
        return rows, train.micro_batches
    total, rest = divmod(train.global_batch, train.micro_batch)
    if rest:
        return None, ("micro-batch %d does not divide the global batch of %d"
                      % (train.micro_batch, train.global_batch))
    if total % dp:
        return None, ("dp=%d does not divide the %d micro-batches of the global batch (%d / "
                      "micro-batch %d)" % (dp, total, train.global_batch, train.micro_batch))
    return train.micro_batch, total // dp


def transformer_reason(model, train, layout, micro_batches):
    """Why a transformer cannot run a layout (Megatron-LM's constraints), or None."""
    tp, pp, v = layout.tp, layout.pp, train.virtual_stages
    for name, value in (("heads", model.heads), ("hidden size", model.hidden),
                        ("KV heads", model.kv), ("FFN hidden size", model.ffn)):
        if value % tp:
            return "tp=%d does not divide the %d %s" % (tp, value, name)
    if model.layers % pp:
        return "pp=%d does not divide the %d layers" % (pp, model.layers)
    if v > 1 and (pp == 1 or (model.layers // pp) % v):
        return "%d virtual stages need pp > 1 and to divide the %d layers per stage" % (
            v, model.layers // pp)
    if v > 1 and micro_batches % pp:
        return "the interleaved schedule needs pp=%d to divide the %d micro-batches" % (
            pp, micro_batches)
    return None


def mlp_reason(model, train, layout):
    """Why an MLP cannot run a layout, or None: every stage needs a layer, tp must divide the
    width between a column-parallel layer and its row-parallel partner."""
    if layout.pp > model.layers:
        return "pp=%d exceeds the %d layers" % (layout.pp, model.layers)
    if train.virtual_stages > 1:
        return "virtual stages are for transformer stages"
    for stage in range(layout.pp):
        for layer, role in mlp_stage_roles(model, layout, stage):
            if role == "col" and model.widths[layer + 1] % layout.tp:
                return "tp=%d does not divide the width %d after layer %d" % (
                    layout.tp, model.widths[layer + 1], layer)
    return None


def invalid_reason(model, train, layout):
    """(reason or None, micro_batch, micro_batches)."""
    micro_batch, micro_batches = micro_batching(train, layout.dp)
    if micro_batch is None:
        return micro_batches, None, None
    if model.kind == "mlp":
        reason = mlp_reason(model, train, layout)
    else:
        reason = transformer_reason(model, train, layout, micro_batches)
    return reason, micro_batch, micro_batches


def stage_flops(model, train, layout, stage, micro_batch):
    """Hardware FLOPs one GPU of a stage runs for one micro-batch."""
    if model.kind == "mlp":
        weights = 0.0
        for layer, role in mlp_stage_roles(model, layout, stage):
            w = mlp_layer_weights(model, layer)[0]
            weights += w if role == "whole" else w / layout.tp
        return 6.0 * weights * micro_batch
    tokens = float(model.seq) * micro_batch
    layers = len(stage_layer_range(model, layout.pp, stage))
    flops = layers * layer_flops_per_token(model, train.recompute)
    if stage == layout.pp - 1:
        flops += logits_flops_per_token(model)
    return tokens * flops / layout.tp


def tp_time(model, train, cluster, layout, stage, micro_batch, links):
    """Tensor-parallel communication of one micro-batch on one GPU of a stage. A transformer
    layer allreduces its b*s*h activations twice forward and twice backward (Narayanan et al.
    2021 Sec 3.2; under sequence parallelism all-gathers and reduce-scatters of the same volume,
    Korthikanti et al. 2022 Sec 4.2.2), twice more when full recomputation reruns its forward.
    An MLP pair allreduces once forward (the row-parallel output) and once backward (the
    column-parallel input gradient)."""
    if layout.tp == 1:
        return 0.0
    bw, lat = link_speed(cluster, links["tp"]["link"])
    elem = element_bytes(train.precision)
    if model.kind == "mlp":
        t = 0.0
        for layer, role in mlp_stage_roles(model, layout, stage):
            width = model.widths[layer + 1] if role == "row" else model.widths[layer]
            if role in ("row", "col"):
                t += allreduce_time(micro_batch * width * elem, layout.tp, bw, lat)
        return t
    count = 6 if train.recompute == "full" else 4
    layers = len(stage_layer_range(model, layout.pp, stage))
    sbh = float(model.seq) * micro_batch * model.hidden
    return layers * count * allreduce_time(sbh * elem, layout.tp, bw, lat)


def boundary_bytes(model, train, layout, stage, micro_batch):
    """Bytes a stage sends to its neighbour per micro-batch and direction: a transformer's
    b*s*h/t activations (each tp rank sends its slice, Narayanan et al. 2021 Sec 4.1, or its
    sequence-parallel part); an MLP the rows x local width at its widest boundary."""
    elem = element_bytes(train.precision)
    if model.kind == "transformer":
        return float(model.seq) * micro_batch * model.hidden * elem / layout.tp
    widths = []
    for k in (stage - 1, stage):
        if 0 <= k < layout.pp - 1:
            layer, role = mlp_stage_roles(model, layout, k)[-1]
            widths.append(mlp_local_layer(model, layer, role, layout.tp)[1])
    return micro_batch * max(widths) * elem


def pp_time(model, train, cluster, layout, stage, micro_batch, links):
    """Pipeline sends of one micro-batch on one GPU of a stage: an activation forward and a
    gradient backward (each exchanged with the neighbour at once, send and receive), v times
    with v virtual stages; without sequence parallelism a transformer's receiving tp group
    all-gathers the b*s*h slices over its own links (Narayanan et al. 2021 Sec 4.1)."""
    if layout.pp == 1:
        return 0.0
    bw, lat = link_speed(cluster, links["pp"]["link"])
    nbytes = boundary_bytes(model, train, layout, stage, micro_batch)
    t = 2 * train.virtual_stages * p2p_time(nbytes, bw, lat)
    if model.kind == "transformer" and layout.tp > 1 and not train.sequence_parallel:
        tp_bw, tp_lat = link_speed(cluster, links["tp"]["link"])
        t += 2 * train.virtual_stages * all_gather_time(nbytes * layout.tp, layout.tp,
                                                        tp_bw, tp_lat)
    return t


def dp_time(train, cluster, layout, params, links):
    """The data-parallel gradient reduction of one step on one GPU holding `params` parameters:
    a ring allreduce of the gradients, or with ZeRO-1 (Megatron's distributed optimizer) a
    reduce-scatter of the gradients then an all-gather of the updated weights (the same volume
    when both have one size, Rajbhandari et al. 2020 Sec 7.2.1); in buckets of bucket_bytes,
    each paying the latencies once."""
    if layout.dp == 1:
        return 0.0
    bw, lat = link_speed(cluster, links["dp"]["link"])
    weight_b, grad_b, _ = state_bytes(train.precision, train.optimizer, train.accounting)
    grads = params * grad_b
    buckets = max(1, math.ceil(grads / cluster.bucket_bytes))
    if train.zero == 0:
        return buckets * allreduce_time(grads / buckets, layout.dp, bw, lat)
    return buckets * (reduce_scatter_time(grads / buckets, layout.dp, bw, lat) +
                      all_gather_time(params * weight_b / buckets, layout.dp, bw, lat))


def step_time(model, train, cluster, layout, micro_batch, micro_batches, links, params):
    """{'step', 'compute', 'tp', 'pp', 'bubble', 'dp'} seconds of one iteration; compute, tp and
    pp are those of the slowest stage over its m micro-batches."""
    per_stage = []
    for stage in range(layout.pp):
        per_stage.append((stage_flops(model, train, layout, stage, micro_batch) /
                          (cluster.gpu_flops * cluster.mfu),
                          tp_time(model, train, cluster, layout, stage, micro_batch, links),
                          pp_time(model, train, cluster, layout, stage, micro_batch, links)))
    totals = [sum(t) for t in per_stage]
    slowest = per_stage[totals.index(max(totals))]
    out = {"compute": micro_batches * slowest[0], "tp": micro_batches * slowest[1],
           "pp": micro_batches * slowest[2],
           "bubble": (layout.pp - 1.0) / train.virtual_stages * sum(totals) / layout.pp,
           "dp": max(dp_time(train, cluster, layout, p, links) for p in params)}
    out["step"] = out["compute"] + out["tp"] + out["pp"] + out["bubble"] + out["dp"]
    return out


def memory_reason(peak, cluster):
    return ("needs %s per GPU on stage %d (weights %s, gradients %s, optimizer %s, activations "
            "%s%s) > %s" % (fmt_bytes(peak["total"]), peak["stage"], fmt_bytes(peak["weights"]),
                            fmt_bytes(peak["gradients"]), fmt_bytes(peak["optimizer"]),
                            fmt_bytes(peak["activations"]),
                            (", base %s" % fmt_bytes(peak["base"])) if peak["base"] else "",
                            fmt_bytes(cluster.gpu_mem)))


def estimate(model, train, cluster, layout):
    """Everything the planner knows of one layout, as a dict (status 'ok', 'no-fit' or
    'invalid', with a reason unless ok)."""
    result = {"tp": layout.tp, "pp": layout.pp, "dp": layout.dp}
    reason, micro_batch, micro_batches = invalid_reason(model, train, layout)
    if reason:
        result.update(status="invalid", reason=reason)
        return result
    stages = [stage_memory(model, train, cluster, layout, s, micro_batch, micro_batches)
              for s in range(layout.pp)]
    peak = max(stages, key=lambda s: s["total"])
    links = dimension_links(layout, cluster)
    times = step_time(model, train, cluster, layout, micro_batch, micro_batches, links,
                      [s["params"] for s in stages])
    model_flops = flops_per_token(model, train.recompute)[0] * train.global_batch * (
        1 if model.kind == "mlp" else model.seq)
    result.update(status="ok", reason="", micro_batch=micro_batch, micro_batches=micro_batches,
                  bubble_fraction=(layout.pp - 1.0) / (train.virtual_stages * micro_batches),
                  memory={"peak": peak["total"], "peak_stage": peak["stage"], "at_peak": peak,
                          "first": stages[0], "last": stages[-1]},
                  time=times, links=links,
                  mfu=model_flops / (times["step"] * cluster.gpus * cluster.gpu_flops))
    if peak["total"] > cluster.gpu_mem:
        result.update(status="no-fit", reason=memory_reason(peak, cluster))
    return result


def plan(model, train, cluster):
    """(ranked, rejected): the layouts that fit, fastest first (then least memory), and the
    others with their reasons, in enumeration order."""
    results = [estimate(model, train, cluster, l) for l in factorizations(cluster.gpus)]
    ranked = sorted((r for r in results if r["status"] == "ok"),
                    key=lambda r: (r["time"]["step"], r["memory"]["peak"], r["tp"], r["pp"]))
    for i, r in enumerate(ranked):
        r["rank"] = i + 1
    return ranked, [r for r in results if r["status"] != "ok"]

