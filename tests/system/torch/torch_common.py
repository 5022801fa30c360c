"""Helpers of the torch.distributed backend's tests (label "ecosystem").

They run under collective-launch with Debian's /usr/bin/python3, which sets torchrun's
variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...) besides COLL_*: the tests call
``dist.init_process_group("collectived")`` as any torch script would. They skip (exit 77)
when torch or the backend's extension is missing, saying why.
"""

import datetime
import importlib.util
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import common  # noqa: E402

# Every wait of a test: a hang fails well within ctest's TIMEOUT.
TIMEOUT = datetime.timedelta(seconds=60)


def require_backend():
    """torch and torch.distributed, or skip; skip too when the extension was not built."""
    torch = common.require("torch")
    if importlib.util.find_spec("collective._torch_pg") is None:
        common.skip("collective/_torch_pg (the torch backend) was not built: install "
                    "libtorch-dev and pybind11-dev (deploy/install-deps.sh) and rebuild")
    import torch.distributed as dist
    return torch, dist

