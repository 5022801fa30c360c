"""An optimizer for PyTorch training loops whose update runs in collectived's parameter service.

:class:`ServiceOptimizer` takes the place of a ``torch.optim`` optimizer in a data-parallel
loop (every rank runs the same loop on its part of the global batch)::

    comm = collective.Communicator()
    opt = ServiceOptimizer(comm, model.parameters(), "adamw", lr=1e-3, weight_decay=0.01)
    for x, y in batches:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()                   # gradients averaged over the ranks, parameters updated

There is no gradient allreduce in the loop (no DDP): :meth:`ServiceOptimizer.step` hands the
rank's gradients to the daemons, which average them (a reduce-scatter), apply the optimizer to
the shard of the parameters their node owns (ZeRO-1: each node holds 1/nodes of the optimizer
state) and all-gather the updated parameters into every rank's model (include/collective_ps.h,
docs/parameter-service.md). With ``compression="onebit"`` (or fp16, bf16, topk:RATIO) the
gradients travel compressed with error feedback and the parameters come back exact. Imports
torch.
"""

import ctypes
import weakref

from . import _lib
from .comm import parse_compression
from .errors import make_error

STATE_DICT_VERSION = 1

_DECAYS = {"constant": 0, "step": 1, "cosine": 2}
_LAMB_BIAS = {"paper": 0, "none": 1, "stepsize": 2}
# coll_ps_layer_t.flags (collective_ps.h).
_NO_WEIGHT_DECAY, _NO_TRUST = 1, 2
# Optimizer settings: keyword -> coll_ps_optim_t field(s); betas and the clamps are pairs.
_SCALARS = ("momentum", "dampening", "weight_decay", "eps", "eta", "clip_grad_norm",
            "clip_eps")
_FLAGS = ("nesterov", "eps_inside_sqrt", "grad_averaging", "l2")
_PAIRS = {"betas": ("beta1", "beta2"), "trust_clamp": ("trust_min", "trust_max"),
          "phi_clamp": ("phi_min", "phi_max")}
_SCHEDULE = ("base_batch", "global_batch", "warmup_steps", "warmup_start_lr", "decay",
             "milestones", "gamma", "total_steps", "final_lr")
_GROUP_KEYS = ("params", "weight_decay", "trust")


def _kind(lib, name):
    """The coll_ps_optimizer_t of optimizer @name."""
    kind = ctypes.c_int()
    if lib.coll_ps_optimizer_parse(str(name).encode(), ctypes.byref(kind)) != _lib.COLL_OK:
        raise ValueError("optimizer %r is not sgd, adamw, lars or lamb" % (name,))
    return kind


def _optim(lib, name, settings):
    """The coll_ps_optim_t of optimizer @name: its reference's defaults, then @settings."""
    kind = _kind(lib, name)
    o = _lib.PsOptim()
    lib.coll_ps_optim_init(kind.value, ctypes.byref(o))
    for key, value in settings.items():
        if value is None:
            continue
        if key in _SCALARS:
            setattr(o, key, float(value))
        elif key in _FLAGS:
            setattr(o, key, int(bool(value)))
        elif key in _PAIRS:
            lo, hi = value
            setattr(o, _PAIRS[key][0], float(lo))
            setattr(o, _PAIRS[key][1], float(hi))
        elif key == "lamb_bias":
            if value not in _LAMB_BIAS:
                raise ValueError("lamb_bias %r is not one of %s" % (value, sorted(_LAMB_BIAS)))
            o.lamb_bias = _LAMB_BIAS[value]
        else:
            raise TypeError("unknown optimizer setting %r" % (key,))
    return o


def _schedule(lib, lr, schedule):
    """The coll_ps_schedule_t of base learning rate @lr and the dict @schedule (_SCHEDULE)."""
    s = _lib.PsSchedule()
    lib.coll_ps_schedule_constant(float(lr), ctypes.byref(s))
    for key, value in (schedule or {}).items():
        if key not in _SCHEDULE:
            raise TypeError("unknown schedule setting %r (known: %s)" % (key, ", ".join(_SCHEDULE)))
        if key == "decay":
            if value not in _DECAYS:
                raise ValueError("decay %r is not constant, step or cosine" % (value,))
            s.decay = _DECAYS[value]
        elif key == "milestones":
            if len(value) > _lib.PS_MAX_MILESTONES:
                raise ValueError("%d milestones, at most %d" % (len(value), _lib.PS_MAX_MILESTONES))
            s.num_milestones = len(value)
            for i, m in enumerate(value):
                s.milestones[i] = int(m)
        else:
            setattr(s, key, type(getattr(s, key))(value))
    return s


def _layers(param_groups, weight_decay):
    """(tensors, flags) of every parameter, in order, from torch-style @param_groups.

    A group may set ``weight_decay`` to 0 (its layers get none) or to the optimizer's value,
    and ``trust=False`` (LARS, LAMB: no trust ratio for its layers)."""
    import torch
    groups = list(param_groups)
    if groups and not isinstance(groups[0], dict):
        groups = [{"params": groups}]
    tensors, flags, seen = [], [], set()
    for g in groups:
        unknown = set(g) - set(_GROUP_KEYS)
        if unknown:
            raise ValueError("parameter group settings %s: the service runs one optimizer "
                             "for all groups; a group may only set %s"
                             % (sorted(unknown), ", ".join(_GROUP_KEYS[1:])))
        wd = g.get("weight_decay", weight_decay)
        if wd not in (0, weight_decay):
            raise ValueError("a group's weight_decay %r is neither 0 nor the optimizer's %r"
                             % (wd, weight_decay))
        f = (_NO_WEIGHT_DECAY if wd == 0 else 0) | (0 if g.get("trust", True) else _NO_TRUST)
        params = [g["params"]] if isinstance(g["params"], torch.Tensor) else list(g["params"])
        for p in params:
            if p.dtype != torch.float32 or p.device.type != "cpu" or p.numel() == 0:
                raise ValueError("parameter of %s %s on %s: the service updates non-empty "
                                 "float32 CPU tensors" % (p.dtype, tuple(p.shape), p.device))
            if id(p) in seen:
                raise ValueError("a parameter of shape %s is given twice" % (tuple(p.shape),))
            seen.add(id(p))
            tensors.append(p)
            flags.append(f)
    if not tensors:
        raise ValueError("no parameters")
    return tensors, flags


def _buckets(tensors, cap_bytes):
    """Bucket of each tensor: consecutive tensors up to @cap_bytes a bucket (one larger than
    the cap alone)."""
    out, bucket, used = [], 0, 0
    for t in tensors:
        nbytes = 4 * t.numel()
        if used and used + nbytes > cap_bytes:
            bucket, used = bucket + 1, 0
        out.append(bucket)
        used += nbytes
    return out


class ServiceOptimizer:
    """A ``torch.optim``-style optimizer run by the daemons' parameter service (ZeRO-1).

    Construction is collective over the job (every rank, the same arguments): the parameters
    move into one flat float32 buffer in the job's pool (each ``p.data`` becomes a view of
    it, so the model reads the parameters the service writes), rank 0's values are broadcast
    to every rank, and the daemons allocate their shard of the optimizer state.

    Args:
        comm (collective.Communicator): the rank's communicator.
        params: an iterable of tensors, or of torch-style groups (dicts with ``"params"`` and
            optionally ``"weight_decay"``: 0 or the optimizer's, and ``"trust": False`` for
            LARS/LAMB layers without trust ratio, e.g. biases and norms).
        optimizer (str): ``"sgd"`` (torch.optim.SGD), ``"adamw"`` (torch.optim.AdamW),
            ``"lars"`` (MLPerf reference), ``"lamb"`` (You et al. 2019, Algorithm 2).
        lr (float): the base learning rate; default the optimizer's own at a global batch of
            256 (coll_ps_optim_default_lr, with its sources in collective_ps.h): sgd 0.05,
            adamw 1e-3 (torch.optim.AdamW's), lars 1.77, lamb 0.014.
        schedule (dict): the service's learning-rate schedule (coll_ps_schedule_t): any of
            ``base_batch``, ``global_batch`` (linear scaling), ``warmup_steps``,
            ``warmup_start_lr``, ``decay`` (``"constant"``, ``"step"``, ``"cosine"``),
            ``milestones``, ``gamma``, ``total_steps``, ``final_lr``. torch LR schedulers
            have no effect: the daemons compute each step's rate.
        bucket_cap_mb (float): consecutive parameters up to this size form one bucket (one
            service operation per bucket and step).
        key_space (int): 0..7 (default 7), the key space of the service's operations: one
            that no bucketer of the job uses (bucketers default to 0; coll_ps_params_t).
        compression (str): how each step's gradients travel between nodes
            (coll_ps_params_t.compression): ``"fp16"``, ``"bf16"``, ``"onebit"`` or
            ``"topk:RATIO"``, optionally with ``,noef`` and ``,warmup=N``; the owner's optimizer
            sees the decoded sum and the parameters come back in float32. None (the default)
            or ``"none"``: exact. ``"powersgd:R"`` and ``"auto"`` raise CollectiveError
            (COLL_ERR_UNSUPPORTED).
        **settings: the optimizer's settings, defaults those of its reference
            (coll_ps_optim_init): ``momentum``, ``dampening``, ``weight_decay``,
            ``nesterov``, ``betas``, ``eps``, ``eta``, ``lamb_bias`` (``"paper"``, ``"none"``,
            ``"stepsize"``), ``eps_inside_sqrt``, ``trust_clamp``, ``phi_clamp``,
            ``grad_averaging``, ``l2``, ``clip_grad_norm``, ``clip_eps``.

    Raises ValueError or TypeError for bad arguments, before any communication;
    :class:`~collective.CollectiveError` for what the library refuses (settings out of range,
    ranks passing different layers: COLL_ERR_MISMATCH; COLL_ERR_POOL_FULL; ranks asking for
    different compression: COLL_ERR_MISMATCH at the first step).

    A parameter without a gradient at :meth:`step` counts as a zero gradient. Errors of a step
    (a lost peer, a non-finite gradient) raise CollectiveError; the parameters may then be
    partly updated and the job is over: resume from a :meth:`state_dict`.

    Thread-safety: one thread at a time.
    """

    def __init__(self, comm, params, optimizer="sgd", lr=None, *, schedule=None,
                 bucket_cap_mb=25.0, key_space=None, compression=None, **settings):
        import torch
        self._lib = comm._lib
        self._native = comm._native
        z = parse_compression(self._lib, compression) if compression is not None else None
        o = _optim(self._lib, optimizer, settings)
        if lr is None:
            lr = self._lib.coll_ps_optim_default_lr(_kind(self._lib, optimizer).value)
        sched = _schedule(self._lib, lr, schedule)
        tensors, flags = _layers(params, o.weight_decay)
        buckets = _buckets(tensors, bucket_cap_mb * (1 << 20))
        count = sum(t.numel() for t in tensors)
        self._flat = comm.empty_tensor(count)
        self._grads = comm.empty_tensor(count)
        self._params, self._views, off = tensors, [], 0
        with torch.no_grad():
            for t in tensors:
                view = self._flat[off:off + t.numel()]
                view.copy_(t.reshape(-1))
                t.data = view.view_as(t)
                self._views.append((off, t.numel()))
                off += t.numel()
        layers = (_lib.PsLayer * len(tensors))(
            *[_lib.PsLayer(t.numel(), f, b) for t, f, b in zip(tensors, flags, buckets)])
        p = _lib.PsParams(params=self._flat.data_ptr(), layers=layers, num_layers=len(tensors),
                          optim=o, schedule=sched)
        if key_space is not None:
            p.field_mask, p.key_space = _lib.PS_PARAM_KEY_SPACE, int(key_space)
        if z is not None:
            p.field_mask, p.compression = p.field_mask | _lib.PS_PARAM_COMPRESSION, z
        ps = ctypes.c_void_p()
        self._check(self._lib.coll_ps_create(self._native.handle(), ctypes.byref(p),
                                             ctypes.byref(ps)), "coll_ps_create")
        self._ps = ps
        self.optimizer = str(optimizer)
        self._finalizer = weakref.finalize(self, self._lib.coll_ps_destroy, ps)

    def _check(self, status, context):
        if status < 0:
            raise make_error(status, self._native.last_error(), context)

    @property
    def num_buckets(self):
        """Buckets of the service: operations per step."""
        return int(self._lib.coll_ps_num_buckets(self._ps))

    @property
    def steps(self):
        """Steps done (the next :meth:`step` is this + 1)."""
        return int(self._lib.coll_ps_steps(self._ps))

    def zero_grad(self, set_to_none=True):
        """Forget the gradients: ``p.grad = None`` (or zero them, @set_to_none False)."""
        for t in self._params:
            if t.grad is None:
                continue
            if set_to_none:
                t.grad = None
            else:
                t.grad.detach_().zero_()

    def step(self, closure=None):
        """One step of the service, collective over the job: this rank's gradients go in,
        every parameter comes back updated. Returns @closure's loss when given (it is called
        first, with gradients enabled, as torch.optim does)."""
        import torch
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with torch.no_grad():
            for t, (off, n) in zip(self._params, self._views):
                dst = self._grads[off:off + n]
                if t.grad is None:
                    dst.zero_()
                else:
                    dst.copy_(t.grad.reshape(-1))
        self._check(self._lib.coll_ps_step(self._ps, self._grads.data_ptr()), "coll_ps_step")
        return loss

    def state_dict(self):
        """This node's shard of the optimizer state and the step, collective over the job
        (coll_ps_save): ``{"collective_ps": 1, "optimizer", "step", "shard": bytes}``. The
        parameters are the model's (save ``model.state_dict()`` too). To resume on another
        number of nodes, keep the state dict of one rank of every node."""
        image, nbytes = ctypes.c_void_p(), ctypes.c_size_t()
        self._check(self._lib.coll_ps_save(self._ps, ctypes.byref(image), ctypes.byref(nbytes)),
                    "coll_ps_save")
        try:
            shard = ctypes.string_at(image.value, nbytes.value)
        finally:
            _lib.libc_free(image.value)
        return {"collective_ps": STATE_DICT_VERSION, "optimizer": self.optimizer,
                "step": self.steps, "shard": shard}

    def load_state_dict(self, state_dict):
        """Restore the optimizer state and the step, collective over the job (coll_ps_load).
        @state_dict: one of :meth:`state_dict` (this node's, same number of nodes), or a
        list of them, one of every node of the checkpoint (any number of nodes now: each
        node takes its new shard out of them). Restore the model's parameters too.

        Raises ValueError for something that is no such state dict (before any
        communication); CollectiveError COLL_ERR_INVALID for images of another registration
        or step, or missing nodes (the message says which; the job is ended then)."""
        dicts = state_dict if isinstance(state_dict, (list, tuple)) else [state_dict]
        for d in dicts:
            if not isinstance(d, dict) or d.get("collective_ps") != STATE_DICT_VERSION or \
                    not isinstance(d.get("shard"), bytes):
                raise ValueError("not a state dict of ServiceOptimizer version %d"
                                 % STATE_DICT_VERSION)
        shards = [d["shard"] for d in dicts]
        bufs = [ctypes.create_string_buffer(s, len(s)) for s in shards]
        images = (ctypes.c_void_p * len(bufs))(*[ctypes.addressof(b) for b in bufs])
        sizes = (ctypes.c_size_t * len(bufs))(*[len(s) for s in shards])
        self._check(self._lib.coll_ps_load(self._ps, images, sizes, len(bufs)), "coll_ps_load")

    def close(self):
        """Free the client side of the service (the daemons keep the state until the job
        ends). The model's parameters stay views of pool memory. Idempotent."""
        self._finalizer()
