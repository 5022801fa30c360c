"""Registers the "collectived" torch.distributed backend whenever torch.distributed is imported,
so that an unchanged script can say ``dist.init_process_group("collectived")``.

``collective-torch.pth``, installed next to the ``collective`` package (a directory where
Python reads ``.pth`` files at start-up), calls :func:`install`. It imports only os, sys and
warnings: a finder on ``sys.meta_path`` waits for the import of ``torch.distributed`` and, once
that module has run, registers a creator that imports :mod:`collective.torch_backend` (and the
C++ extension) only when a group of this backend is created. It removes itself after that one
import. ``COLLECTIVE_TORCH_AUTOLOAD=0`` turns it off. A failure to register never breaks
``import torch``: it becomes a warning.
"""

import os
import sys
import warnings

BACKEND = "collectived"
TARGET = "torch.distributed"


def _create(opts, pg_options=None):
    from collective import torch_backend
    return torch_backend.create(opts, pg_options)


def register(dist):
    """Register the backend in the torch.distributed module @dist (idempotent)."""
    if not hasattr(dist.Backend, BACKEND.upper()):
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)


# The finder and the loader follow the importlib protocols without deriving from importlib.abc,
# whose import alone would add tens of milliseconds to every interpreter's start.
class _Loader:
    """torch.distributed's own loader, which registers the backend after the module ran."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            register(module)
        except Exception as e:  # torch must import even when this fails
            warnings.warn("collectived was not registered as a torch.distributed backend: %s"
                          % e)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Finder:
    """Finds torch.distributed through the other finders and wraps its loader, once."""

    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install():
    """Register now when torch.distributed is loaded, else when it gets imported."""
    if os.environ.get("COLLECTIVE_TORCH_AUTOLOAD", "1") == "0":
        return
    dist = sys.modules.get(TARGET)
    if dist is not None and hasattr(dist, "Backend"):
        register(dist)
    elif dist is None and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
