"""What the planner is asked about: the training run, the cluster, and a (tp, pp, dp) layout."""

from collections import namedtuple
from dataclasses import dataclass

PRECISIONS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("adam", "sgd")
RECOMPUTE = ("none", "selective", "full")
ACCOUNTINGS = ("megatron", "zero")
DIMS = ("tp", "dp", "pp")
MEGATRON_ORDER = "tp-dp-pp"

# A layout: tensor-, pipeline- and data-parallel sizes, GPUs = tp * pp * dp.
Layout = namedtuple("Layout", "tp pp dp")


@dataclass(frozen=True)
class Training:
    """The training run. micro_batch is in samples (sequences); when it is 0, micro_batches (per
    data-parallel replica) fixes it instead: micro_batch = global_batch / (dp * micro_batches).
    sgd is SGD with momentum (one state per parameter, as coll-train). zero is the ZeRO stage of
    a plan, 0 or 1 (memory.model_state_bytes() also gives stages 2 and 3). virtual_stages > 1 is
    Megatron's interleaved 1F1B schedule with that many model chunks per pipeline stage."""
    global_batch: int
    micro_batch: int = 1
    micro_batches: int = 0
    precision: str = "bf16"
    optimizer: str = "adam"
    recompute: str = "none"
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


def check_training(train):
    """Raise ValueError on an impossible training configuration."""
    checks = ((train.precision in PRECISIONS, "--precision must be one of fp32, bf16, fp16"),
              (train.optimizer in OPTIMIZERS, "--optimizer must be adam or sgd"),
              (train.recompute in RECOMPUTE, "--recompute must be none, selective or full"),
              (train.accounting in ACCOUNTINGS, "--accounting must be megatron or zero"),
              (train.zero in (0, 1), "--zero must be 0 or 1 (Megatron's distributed optimizer)"),
              (train.global_batch >= 1, "--global-batch must be at least 1"),
              (train.micro_batch >= 1 or train.micro_batches >= 1,
               "give --micro-batch or --micro-batches"),
              (train.virtual_stages >= 1, "--virtual-stages must be at least 1"))
    for ok, message in checks:
        if not ok:
            raise ValueError(message)


def check_cluster(cluster):
    """Raise ValueError on an impossible cluster, or on an order that is not tp, dp, pp."""
    if cluster.nodes < 1 or cluster.gpus_per_node < 1:
        raise ValueError("--nodes and --gpus-per-node must be at least 1")
    for name in ("gpu_mem", "intra_bw", "inter_bw", "gpu_flops"):
        if getattr(cluster, name) <= 0:
            raise ValueError("--%s must be positive" % name.replace("_", "-"))
    if not 0 < cluster.mfu <= 1:
        raise ValueError("--mfu must be in (0, 1]")
    if sorted(cluster.order.split("-")) != sorted(DIMS):
        raise ValueError("--order must name tp, dp and pp once each, fastest first, e.g. tp-dp-pp")


def element_bytes(precision):
    """Bytes of one activation element: 4 in fp32, 2 in bf16 and fp16."""
    return 4 if precision == "fp32" else 2
