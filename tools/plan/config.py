"""What the planner is asked about: the training run, the cluster, and a (tp, pp, dp) layout."""

from collections import namedtuple
from dataclasses import dataclass

PRECISIONS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("adam", "sgd")
RECOMPUTE = ("none", "selective", "full")
# flash: the attention scores are never stored (FlashAttention, Dao et al. 2022, the default of
# current stacks: Megatron-Core, NeMo, PyTorch's scaled_dot_product_attention); standard: the
# softmax input and output and the dropout mask are, 5as/h per s*b*h (Korthikanti et al. 2022).
ATTENTIONS = ("flash", "standard")
ACCOUNTINGS = ("megatron", "zero")
DIMS = ("tp", "dp", "pp")
MEGATRON_ORDER = "tp-dp-pp"

# A layout: tensor-, pipeline- and data-parallel sizes, GPUs = tp * pp * dp.
Layout = namedtuple("Layout", "tp pp dp")


@dataclass(frozen=True)
class Training:
    """The training run. micro_batch is in samples (sequences); when it is 0, micro_batches (per
    data-parallel replica) fixes it instead: micro_batch = global_batch / (dp * micro_batches).
    attention is flash (no score memory) or standard (ATTENTIONS). sgd is SGD with momentum
    (one state per parameter, as coll-train). zero is the ZeRO stage of a plan, 0 or 1
    (memory.model_state_bytes() also gives stages 2 and 3). virtual_stages > 1 is Megatron's
    interleaved 1F1B schedule with that many model chunks per pipeline stage."""
    global_batch: int
    micro_batch: int = 1
    micro_batches: int = 0
    precision: str = "bf16"
    optimizer: str = "adam"
    recompute: str = "none"
    attention: str = "flash"
    sequence_parallel: bool = False
    zero: int = 0
    accounting: str = "megatron"
    virtual_stages: int = 1


@dataclass(frozen=True)
class Cluster:
    """The machines. Bandwidths are bytes/s one GPU (rank) sends at in one direction: intra_bw to
    GPUs of its node, inter_bw to other nodes (its own NIC, one per GPU as on DGX A100/H100).
    latencies are seconds per message (per step of a ring). mfu is the fraction of gpu_flops the
    math reaches, communication and the pipeline bubble being counted apart. base_mem is the fixed
    memory of every process (CUDA context, NCCL buffers, allocator slack; for a CPU trainer its
    code, data set and runtime). order is the rank order of the layout, fastest first."""
    nodes: int
    gpus_per_node: int
    gpu_mem: float = 80e9
    intra_bw: float = 300e9
    inter_bw: float = 25e9
    gpu_flops: float = 312e12
    intra_latency: float = 2e-6
    inter_latency: float = 5e-6
    mfu: float = 0.5
    base_mem: float = 0.0
    order: str = MEGATRON_ORDER
    bucket_bytes: float = 25e6

    @property
    def gpus(self):
        return self.nodes * self.gpus_per_node


def training_problems(train):
    """The messages of everything that makes the training run impossible, one per problem."""
    checks = ((train.precision in PRECISIONS, "--precision must be one of fp32, bf16, fp16"),
              (train.optimizer in OPTIMIZERS, "--optimizer must be adam or sgd"),
              (train.recompute in RECOMPUTE, "--recompute must be none, selective or full"),
              (train.attention in ATTENTIONS, "--attention must be flash or standard"),
              (train.accounting in ACCOUNTINGS, "--accounting must be megatron or zero"),
              (train.zero in (0, 1), "--zero must be 0 or 1 (Megatron's distributed optimizer)"),
              (train.global_batch >= 1, "--global-batch must be at least 1"),
              (train.micro_batch >= 1 or train.micro_batches >= 1,
               "give --micro-batch or --micro-batches"),
              (train.virtual_stages >= 1, "--virtual-stages must be at least 1"))
    return [message for ok, message in checks if not ok]


def cluster_problems(cluster):
    """The messages of everything that makes the cluster impossible, or an order that is not
    tp, dp, pp, one per problem."""
    problems = ["--%s %d: must be at least 1" % (name.replace("_", "-"), getattr(cluster, name))
                for name in ("nodes", "gpus_per_node") if getattr(cluster, name) < 1]
    problems += ["--%s must be positive" % name.replace("_", "-")
                 for name in ("gpu_mem", "intra_bw", "inter_bw", "gpu_flops")
                 if getattr(cluster, name) <= 0]
    if not 0 < cluster.mfu <= 1:
        problems.append("--mfu must be in (0, 1]")
    if sorted(cluster.order.split("-")) != sorted(DIMS):
        problems.append("--order %s: must name tp, dp and pp once each, fastest first, e.g. "
                        "tp-dp-pp" % cluster.order)
    return problems


def element_bytes(precision):
    """Bytes of one activation element: 4 in fp32, 2 in bf16 and fp16."""
    return 4 if precision == "fp32" else 2
