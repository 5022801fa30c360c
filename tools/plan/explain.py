"""The planner's choice in plain words: why the best layout's tp, pp and dp, what its bubble and
memory are, and what the best layout with another value of each would cost."""

from dataclasses import replace

from .planner import plan
from .units import fmt_bandwidth, fmt_bytes, fmt_time

COMPONENTS = {"compute": "compute", "tp": "tensor-parallel allreduces", "pp": "pipeline sends",
              "bubble": "pipeline bubble", "dp": "gradient reduction"}
PLACE = {"intra": "inside a server", "inter": "between servers"}


def link_words(result, dim, cluster):
    link = result["links"][dim]["link"]
    bw = cluster.inter_bw if link == "inter" else cluster.intra_bw
    return "%s (%s)" % (PLACE[link], fmt_bandwidth(bw))


def slower_words(result, best):
    ratio = result["time"]["step"] / best["time"]["step"]
    return ("%.1fx slower" % ratio) if ratio >= 2 else ("%.0f%% slower" % (100 * (ratio - 1)))


def layout_name(r):
    return "tp=%d pp=%d dp=%d" % (r["tp"], r["pp"], r["dp"])


def headline(best, model, train, cluster):
    per = "samples" if model.kind == "mlp" else "sequences of %d tokens" % model.seq
    return ("Best: %s, about %s per step of %d %s (%.0f%% model FLOPs utilization), %s of %s "
            "per GPU." % (layout_name(best), fmt_time(best["time"]["step"]), train.global_batch,
                          per, 100 * best["mfu"], fmt_bytes(best["memory"]["peak"]),
                          fmt_bytes(cluster.gpu_mem)))


def tp_words(best, model, train, cluster):
    tp = best["tp"]
    if tp == 1:
        return "tp=1: no layer needs its matrices split, so there are no per-layer allreduces."
    if model.kind == "mlp":
        what = "the 2 allreduces per layer pair and micro-batch (1 forward, 1 backward)"
    else:
        count = 6 if train.recompute == "full" else 4
        what = ("the %d allreduces per layer and micro-batch (%s, of b*s*h activations, %s each)"
                % (count, "3 forward and 3 backward with full recomputation" if count == 6
                   else "2 forward, 2 backward",
                   fmt_bytes(model.seq * best["micro_batch"] * model.hidden *
                             (4 if train.precision == "fp32" else 2))))
    where = link_words(best, "tp", cluster)
    if best["links"]["tp"]["link"] == "intra":
        return ("tp=%d keeps %s on the links %s: every tp group lies in one node; they cost %s "
                "per step." % (tp, what, where, fmt_time(best["time"]["tp"])))
    return ("tp=%d spans servers: %s run %s, %s per step." % (
        tp, what, where, fmt_time(best["time"]["tp"])))


def model_parallel_words(best, ranked):
    smallest = min(r["tp"] * r["pp"] for r in ranked)
    mp = best["tp"] * best["pp"]
    if mp == 1:
        return "the whole model fits on one GPU, so data parallelism takes every GPU"
    if mp == smallest:
        return ("tp x pp = %d is the smallest model-parallel size that fits (Narayanan et al. "
                "2021: model parallelism as far as memory needs, data parallelism for the rest)"
                % mp)
    other = next(r for r in ranked if r["tp"] * r["pp"] == smallest)
    return ("a smaller model-parallel size fits too (%s) but is %s" % (
        layout_name(other), slower_words(other, best)))


def pp_words(best, model, ranked, cluster):
    pp = best["pp"]
    if pp == 1:
        return "pp=1: no pipeline, so no bubble; %s." % model_parallel_words(best, ranked)
    layers = "%d layers into %d stages" % (model.layers, pp)
    sent = ("the activations of a micro-batch, b*s*h/t" if model.kind == "transformer"
            else "a micro-batch's activations")
    return ("pp=%d splits the %s: %s. Between stages the pipeline sends only %s per micro-batch "
            "and direction, %s, which costs %s per step." % (
                pp, layers, model_parallel_words(best, ranked), sent,
                link_words(best, "pp", cluster), fmt_time(best["time"]["pp"])))


def dp_words(best, train, cluster):
    dp = best["dp"]
    if dp == 1:
        return ("dp=1: all %d GPUs go to model parallelism, so no gradients are reduced between "
                "replicas." % cluster.gpus)
    how = ("a reduce-scatter of the gradients and an all-gather of the weights (ZeRO-1)"
           if train.zero else "an allreduce of the gradients")
    return ("dp=%d replicas split the global batch; each step ends with %s %s, %s." % (
        dp, how, link_words(best, "dp", cluster), fmt_time(best["time"]["dp"])))


def bubble_words(best, train):
    pp, m, v = best["pp"], best["micro_batches"], train.virtual_stages
    if pp == 1:
        return ("No bubble: with pp=1 the %d micro-batches per replica run back to back." % m)
    formula = "(p-1)/m = %d/%d" % (pp - 1, m) if v == 1 else "(p-1)/(v m) = %d/(%d x %d)" % (
        pp - 1, v, m)
    return ("The bubble is %s = %.2f%% of the ideal time (m = %d micro-batches of %d per "
            "replica), %s per step." % (formula, 100 * best["bubble_fraction"], m,
                                        best["micro_batch"], fmt_time(best["time"]["bubble"])))


def memory_words(best, model, train, cluster):
    stage = best["memory"]["at_peak"]
    sharding = ("sharded over dp=%d by ZeRO-1" % best["dp"]) if train.zero else "not sharded"
    held = min(best["pp"] - stage["stage"], best["micro_batches"])
    return ("Peak memory %s of %s on stage %d: weights %s, gradients %s, optimizer state %s (%s), "
            "activations %s (%d micro-batch%s in flight; recomputation %s, sequence parallelism "
            "%s, %s attention)%s." % (fmt_bytes(stage["total"]), fmt_bytes(cluster.gpu_mem), stage["stage"],
                        fmt_bytes(stage["weights"]), fmt_bytes(stage["gradients"]),
                        fmt_bytes(stage["optimizer"]), sharding, fmt_bytes(stage["activations"]),
                        held, "" if held == 1 else "es", train.recompute,
                        "on" if train.sequence_parallel else "off", train.attention,
                        (", base %s" % fmt_bytes(stage["base"])) if stage["base"] else ""))


def alternative(best, ranked, rejected, dim):
    """(layout, sentence tail) of the best layout with another value of `dim`: how much slower
    and for what, or why none fits."""
    other = [r for r in ranked if r[dim] != best[dim]]
    if other:
        r = other[0]
        deltas = {k: r["time"][k] - best["time"][k] for k in COMPONENTS}
        worst = max(deltas, key=deltas.get)
        crosses = (worst in r["links"] and r["links"][worst]["link"] == "inter" and
                   best["links"][worst]["link"] != "inter")
        return layout_name(r), "%s, %s (its %s%s: %s against %s)" % (
            layout_name(r), slower_words(r, best), COMPONENTS[worst],
            " across servers" if crosses else "", fmt_time(r["time"][worst]),
            fmt_time(best["time"][worst]))
    misfits = [r for r in rejected if r[dim] != best[dim] and r["status"] == "no-fit"]
    if misfits:
        r = min(misfits, key=lambda x: x["memory"]["peak"])
        return layout_name(r), "none fits; the closest, %s, %s" % (layout_name(r), r["reason"])
    return None, "none is possible"


def alternatives_words(best, ranked, rejected):
    """One sentence per distinct alternative: 'Best with another tp or pp: ...'."""
    found = []
    for dim in ("tp", "pp", "dp"):
        name, tail = alternative(best, ranked, rejected, dim)
        same = [f for f in found if f[1] == name and name is not None]
        if same:
            same[0][0].append(dim)
        else:
            found.append(([dim], name, tail))
    return ["Best with another %s: %s." % (" or ".join(dims), tail) for dims, _, tail in found]


def explain(ranked, rejected, model, train, cluster):
    """Sentences about the best layout; ['No layout fits ...'] when none does."""
    if not ranked:
        misfits = [r for r in rejected if r["status"] == "no-fit"]
        if not misfits:
            return ["No layout is possible: %s." % "; ".join(
                sorted({r["reason"] for r in rejected}))]
        r = min(misfits, key=lambda x: x["memory"]["peak"])
        return ["No layout fits in %s: the closest, %s, %s." % (
            fmt_bytes(cluster.gpu_mem), layout_name(r), r["reason"])]
    best = ranked[0]
    lines = [headline(best, model, train, cluster), tp_words(best, model, train, cluster),
             pp_words(best, model, ranked, cluster), dp_words(best, train, cluster),
             bubble_words(best, train), memory_words(best, model, train, cluster)]
    lines += alternatives_words(best, ranked, rejected)
    return lines


def memory_saving_hint(model, train, cluster, ranked):
    """A sentence on what Megatron-LM's memory savers (sequence parallelism, selective
    recomputation, the distributed optimizer) would change, when some are off; else None.
    Selective recomputation saves only the attention scores, which flash attention never
    stores: it is proposed with standard attention alone."""
    if model.kind == "mlp":
        return None
    recompute = train.recompute
    if recompute == "none" and train.attention == "standard":
        recompute = "selective"
    better = replace(train, sequence_parallel=True, zero=1, recompute=recompute)
    if better == train:
        return None
    more, _ = plan(model, better, cluster)
    if not more or len(more) <= len(ranked):
        return None
    flags = [f for f, on in (("--sequence-parallel", not train.sequence_parallel),
                             ("--recompute selective", better.recompute != train.recompute),
                             ("--zero 1", not train.zero)) if on]
    return ("With %s, %d layouts fit instead of %d; the fastest would be %s at %s per step." % (
        " ".join(flags), len(more), len(ranked), layout_name(more[0]),
        fmt_time(more[0]["time"]["step"])))
