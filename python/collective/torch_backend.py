"""The ``torch.distributed`` backend "collectived": a c10d ProcessGroup over libcollective.

A script selects it by name and changes nothing else::

    import torch.distributed as dist
    dist.init_process_group("collectived")   # env:// (RANK, WORLD_SIZE, MASTER_ADDR/PORT) or store=

Registration: the installed ``collective-torch.pth`` registers the backend whenever
``torch.distributed`` is imported (see :mod:`collective_torch_autoload`), so an unchanged script
finds it; importing this module registers it too (for a tree without the ``.pth``). The group
is created by :func:`create`, the creator torch calls (``register_backend(...,
extended_api=True)``, which passes the group's global ranks and name as well as the store,
rank, size and timeout).

Every collective torch calls is one asynchronous libcollective operation (see
``python/torch_backend/process_group.hpp``): allreduce (SUM, AVG, PRODUCT, MIN, MAX; BAND, BOR
and BXOR of integer tensors; PREMUL_SUM is refused with an error), broadcast, reduce, all_gather,
all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor, gather, scatter (and so
gather_object and scatter_object_list), all_to_all and all_to_all_single (per-rank split
sizes), barrier, send and recv (tags 0..63), for float32, float64, float16, bfloat16, int8,
uint8, int32 and int64 tensors of any strides, on the CPU or, in a build against a torch with
CUDA (``_torch_pg.CUDA``), on a CUDA device. CUDA tensors follow ProcessGroupNCCL's stream
semantics: the operation reads its inputs after the work already queued on the device's
current stream, ``Work.wait()`` makes the current stream wait for it without blocking the CPU,
``Work.synchronize()`` blocks (``python/torch_backend/device.hpp``). all_reduce_coalesced, all_gather_coalesced
(one operation over the tensors packed together), sparse allreduce, recv from any source and
the group's ``monitored_barrier()`` are composed of those in the backend (``python/torch_backend/README.md``). The returned Work
completes when the daemon's request does; ``wait(timeout)``
raises when the timeout passes first; errors raise RuntimeError with the daemon's message.
Tensors from :func:`empty` / :func:`zeros` live in the group's pool (on the device they name)
and are reduced in place (zero copy); any other tensor is copied into a reused pool staging
buffer of its device and back. Under torch 1.x the group is the backend's ProcessGroup itself;
under torch 2.x the backend serves the ProcessGroup torch makes for both "cpu" and "cuda".

Each process group is one collectived job (a communicator of its own): torch creates a group
only on its members, while ``coll_comm_split()`` is a collective of every rank of the parent,
so a group cannot be split from the default one. The job of a group (:func:`job_id`) is
``<base>.pg<torch's group name>-<digest of its global ranks>``. The base belongs to one
``init_process_group``: rank 0 of the default group draws it, ``<COLL_JOB or "torch", with
torchrun's run id when it has one>-<random>``, and every group created afterwards in the same
processes carries it, so the groups of one torchrun job show as one job in ``collectivectl``
and a job started again gets new ids. The group name makes two groups of the same ranks
different jobs, the digest makes ranks that disagree on the membership fail to meet instead
of pairing wrongly. The members' local ranks and sizes come from the store: ranks whose daemon
socket path is the same on the same host (boot id) share a node. Rank 0 of the group puts
under ``collectived/setup`` in the group's store: the job id, a job token it draws at random
(unless ``COLL_JOB_TOKEN`` is set: never a value anyone could compute from the job id), the
local layout, and the root daemon's address: ``COLL_ROOT``, else torchrun's ``MASTER_ADDR`` (or
the host of the TCP store) at port ``COLL_ROOT_PORT`` (29510, the daemon's default listen
port), so a job over several nodes needs nothing beyond torchrun's variables. The others read
it (:func:`_setup`).

The default group keeps the store it was created with and its destruction waits for every
rank (``python/torch_backend/shutdown.cpp``): under env:// rank 0 hosts the TCPStore, and a rank
that called ``init_process_group`` again before rank 0 had closed it would meet the old store.
So ``destroy_process_group()`` then ``init_process_group()`` works as with gloo.

The job's timeout (the rendezvous, and each operation on the daemon) is the group's torch
timeout (``init_process_group(timeout=...)``, 30 minutes by default); connecting to the node's
daemon, and that daemon to the root's, waits at most ``COLL_CONNECT_TIMEOUT_MS`` (10 s), so a
missing daemon fails ``init_process_group`` at once with a message naming it.
"""

import datetime
import hashlib
import inspect
import json
import math
import os
import re
import secrets
import socket

import torch
import torch.distributed as dist

try:
    from . import _torch_pg
except ImportError as e:
    raise ImportError(
        "the collectived torch backend (collective/_torch_pg) is not built: %s; install "
        "libtorch-dev and pybind11-dev (deploy/install-deps.sh) and rebuild" % e) from e

BACKEND = "collectived"
ProcessGroupCollectived = _torch_pg.ProcessGroupCollectived

DEFAULT_SOCKET = "/run/collectived/collectived.sock"
JOB_ID_MAX = 128
_JOB_CHARS = re.compile(r"^[A-Za-z0-9._:-]+$")
_NAME_CHARS = re.compile(r"^[A-Za-z0-9_-]{1,16}$")
_SETUP_KEY = "collectived/setup"
_NODE_KEY = "collectived/node/%d"
_TIMEOUT_MS = (100, 86400000)
DEFAULT_ROOT_PORT = "29510"
# The base of the job ids of the current init_process_group (see the module docstring): set by
# the default group's setup, read by the groups created after it.
_world_base = None


def _digest(text, nbytes):
    return hashlib.blake2b(text.encode(), digest_size=nbytes).hexdigest()


def job_id(base, group_name, ranks):
    """The job of the group named @group_name (torch's, e.g. "0" for the default group) whose
    members are the global @ranks, under the job @base (see the module docstring)."""
    name = group_name if _NAME_CHARS.match(group_name) else _digest(group_name, 8)
    tail = ".pg%s-%s" % (name, _digest(",".join(str(r) for r in ranks), 4))
    if not _JOB_CHARS.match(base) or len(base) + len(tail) > JOB_ID_MAX:
        base = _digest(base, 16)
    return base + tail


def _node_key():
    """What ranks on one node share: the host's boot id and the daemon socket's path."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            host = f.read().strip()
    except OSError:
        host = socket.gethostname()
    return host + "|" + os.path.realpath(os.environ.get("COLL_SOCKET", DEFAULT_SOCKET))


def _local_layout(nodes):
    """[local_rank, local_size] of each rank, from each rank's node key (@nodes, rank order)."""
    seen, layout = {}, []
    for key in nodes:
        layout.append(seen.get(key, 0))
        seen[key] = layout[-1] + 1
    return [[lr, seen[key]] for lr, key in zip(layout, nodes)]


def _new_base():
    """The job-id base of a new init_process_group: COLL_JOB, or "torch" with torchrun's run id
    (TORCHELASTIC_RUN_ID, unless its default "none"), and a random part."""
    run = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    name = os.environ.get("COLL_JOB") or ("torch" if run in ("", "none") else "torch-" + run)
    return "%s-%s" % (name, secrets.token_hex(4))


def _store_host(store):
    """The host of the TCP store under @store (PrefixStores unwrapped), or None."""
    for _ in range(8):
        if hasattr(store, "host"):
            return store.host
        store = getattr(store, "underlying_store", None)
    return None


def _root(store):
    """The root daemon's control address as rank 0 sees it: COLL_ROOT, else MASTER_ADDR (or
    the TCP store's host) at COLL_ROOT_PORT; "" when none is known."""
    if os.environ.get("COLL_ROOT"):
        return os.environ["COLL_ROOT"]
    host = os.environ.get("MASTER_ADDR") or _store_host(store)
    if not host:
        return ""
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "%s:%s" % (host, os.environ.get("COLL_ROOT_PORT", DEFAULT_ROOT_PORT))


def _setup(store, rank, size, group_name, ranks, world):
    """Rank 0 decides the group's job, token, root and local layout; every rank reads them.
    @world: the default group (its base is new, and the next groups' base).

    Returns a dict with "job", "token" ("" when COLL_JOB_TOKEN is used), "root" and "local"
    ([local_rank, local_size] per group rank)."""
    global _world_base
    store.set(_NODE_KEY % rank, _node_key())
    if rank == 0:
        nodes = [store.get(_NODE_KEY % r).decode() for r in range(size)]
        base = _new_base() if world or _world_base is None else _world_base
        token = "" if os.environ.get("COLL_JOB_TOKEN") else secrets.token_hex(16)
        store.set(_SETUP_KEY, json.dumps({"job": job_id(base, group_name, ranks), "base": base,
                                          "token": token, "root": _root(store),
                                          "local": _local_layout(nodes)}))
    setup = json.loads(store.get(_SETUP_KEY).decode())
    if world:
        _world_base = setup["base"]
    return setup


def _timeout_ms(timeout):
    ms = int(timeout.total_seconds() * 1000)
    return min(max(ms, _TIMEOUT_MS[0]), _TIMEOUT_MS[1])


def create(opts, pg_options=None):
    """The backend's creator (``Backend.register_backend(..., extended_api=True)``): joins the
    group's job (blocking until every member did) and returns its ProcessGroupCollectived,
    which for the default group holds @opts.store until its end (see the module docstring).
    @opts: torch's _DistributedBackendOptions (store, group_rank, group_size, timeout,
    group_id, global_ranks_in_group; the latter empty for the default group)."""
    if pg_options is not None:
        raise ValueError("the collectived backend takes no pg_options")
    world = not opts.global_ranks_in_group
    ranks = list(opts.global_ranks_in_group) or list(range(opts.group_size))
    setup = _setup(opts.store, opts.group_rank, opts.group_size, opts.group_id, ranks, world)
    local_rank, local_size = setup["local"][opts.group_rank]
    timeout = opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    return _torch_pg.create(setup["job"], opts.group_rank, opts.group_size, local_rank,
                            local_size, _timeout_ms(timeout), setup["token"], setup["root"],
                            opts.store if world else None)


def register():
    """Register the backend with torch.distributed (idempotent): for the CPU and CUDA devices
    where torch's register_backend takes devices (torch 2.x)."""
    if hasattr(dist.Backend, BACKEND.upper()):
        return
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        dist.Backend.register_backend(BACKEND, create, extended_api=True,
                                      devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND, create, extended_api=True)


def _group(group):
    """The collectived backend of @group (default: the default group): the group itself under
    torch 1.x, its backend under torch 2.x."""
    pg = dist.group.WORLD if group is None else group
    if not isinstance(pg, ProcessGroupCollectived) and hasattr(pg, "_get_backend"):
        try:
            pg = pg._get_backend(torch.device("cpu"))
        except RuntimeError:
            pass
    if not isinstance(pg, ProcessGroupCollectived):
        raise TypeError("%r is not a process group of the collectived backend" % (pg,))
    return pg


def _device_index(device):
    """-1 for the CPU, else the index of CUDA device @device (a torch.device, "cuda:1", 1;
    "cuda": the current one). Raises ValueError for another device type."""
    if device is None:
        return -1
    device = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
    if device.type == "cpu":
        return -1
    if device.type != "cuda":
        raise ValueError("the collectived backend's pool is in host memory or on a CUDA "
                         "device, not on %s" % (device,))
    if device.index is not None:
        return device.index
    return torch.cuda.current_device() if torch.cuda.is_available() else 0


def empty(*size, dtype=torch.float32, group=None, device=None):
    """A tensor of @size in @group's pool (default: the default group), uninitialized, in host
    memory or on CUDA @device (the job's device pool there). Collectives of that group on it,
    or on contiguous views of it, copy nothing; it is freed when its storage goes. Raises
    RuntimeError (COLL_ERR_POOL_FULL) when the pool is full, or when there is no pool on that
    device (a backend built without CUDA tensors; a daemon without a CUDA driver, with its
    reason); ValueError for a device neither the CPU nor CUDA."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    count = math.prod(int(n) for n in size)
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = _group(group)._alloc(count * itemsize, _device_index(device))
    return raw.view(dtype).view(size)


def zeros(*size, dtype=torch.float32, group=None, device=None):
    """As :func:`empty`, filled with zeros."""
    return empty(*size, dtype=dtype, group=group, device=device).zero_()


def staging_stats(group=None):
    """The staging buffers of @group: dict of "allocations" (pool allocations so far),
    "reuses" (operations served by a buffer allocated before) and "bytes" (held now)."""
    return _group(group)._staging_stats()


register()
