"""Datatypes, reductions and algorithms of the C API, and what a collective needs to know about a
numpy array or torch tensor (address, element count, datatype).

numpy and torch are imported lazily: a program that uses only numpy never imports torch.
"""

import enum
import sys
from collections import namedtuple


class DType(enum.IntEnum):
    """``coll_dtype_t``. numpy has no bfloat16: pass ``dtype="bfloat16"`` with a uint16 array."""

    FLOAT32 = 0
    FLOAT64 = 1
    FLOAT16 = 2
    BFLOAT16 = 3
    INT8 = 4
    UINT8 = 5
    INT32 = 6
    INT64 = 7

    @property
    def itemsize(self):
        """Size of one element in bytes."""
        return _ITEMSIZE[self]


_ITEMSIZE = {DType.FLOAT32: 4, DType.FLOAT64: 8, DType.FLOAT16: 2, DType.BFLOAT16: 2,
             DType.INT8: 1, DType.UINT8: 1, DType.INT32: 4, DType.INT64: 8}


class Op(enum.IntEnum):
    """``coll_redop_t``. AVG is the sum divided by the world size (see collective.h); BAND, BOR
    and BXOR are bitwise and take the integer dtypes only."""

    SUM = 0
    AVG = 1
    PROD = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7


class Algo(enum.IntEnum):
    """``coll_algo_t``: AUTO lets the daemons choose; the others force one."""

    AUTO = 0
    RING = 1
    RD = 2
    CHAIN = 3
    DISSEMINATION = 4
    DIRECT = 5
    NCCL = 6


def _parse(enum_cls, value, what):
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        try:
            return enum_cls[value.upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_cls(value)
        except ValueError:
            pass
    names = ", ".join(m.name.lower() for m in enum_cls)
    raise ValueError("unknown %s %r (one of %s)" % (what, value, names))


def parse_op(op):
    """An :class:`Op` from an Op, its value or its name (``"sum"``, ``"avg"``, ...)."""
    return _parse(Op, op, "reduction")


def parse_algo(algo):
    """An :class:`Algo` from an Algo, its value or its name (``"ring"``, ``"rd"``, ...)."""
    return _parse(Algo, algo, "algorithm")


def _numpy_dtypes():
    import numpy as np
    return {np.dtype(np.float32): DType.FLOAT32, np.dtype(np.float64): DType.FLOAT64,
            np.dtype(np.float16): DType.FLOAT16, np.dtype(np.int8): DType.INT8,
            np.dtype(np.uint8): DType.UINT8, np.dtype(np.int32): DType.INT32,
            np.dtype(np.int64): DType.INT64}


def _torch_dtypes():
    import torch
    return {torch.float32: DType.FLOAT32, torch.float64: DType.FLOAT64,
            torch.float16: DType.FLOAT16, torch.bfloat16: DType.BFLOAT16,
            torch.int8: DType.INT8, torch.uint8: DType.UINT8, torch.int32: DType.INT32,
            torch.int64: DType.INT64}


def parse_dtype(dtype):
    """A :class:`DType` from a DType, its value, its name, a numpy dtype (or numpy's name of
    one) or a torch dtype. Raises TypeError for a datatype collectived does not have."""
    if isinstance(dtype, str) and dtype.upper() in DType.__members__:
        return DType[dtype.upper()]
    if isinstance(dtype, (DType, int)):
        return _parse(DType, dtype, "datatype")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dtype, torch.dtype):
        try:
            return _torch_dtypes()[dtype]
        except KeyError:
            raise TypeError("torch dtype %s is not supported by collectived" % dtype) from None
    import numpy as np
    try:
        return _numpy_dtypes()[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError("dtype %r is not supported by collectived" % (dtype,)) from None


def numpy_dtype(dtype):
    """The numpy dtype that stores @dtype (uint16 for bfloat16)."""
    import numpy as np
    dt = parse_dtype(dtype)
    if dt == DType.BFLOAT16:
        return np.dtype(np.uint16)
    return next(k for k, v in _numpy_dtypes().items() if v == dt)


def torch_dtype(dtype):
    """The torch dtype of @dtype (a DType, a name, or a torch dtype)."""
    dt = parse_dtype(dtype)
    return next(k for k, v in _torch_dtypes().items() if v == dt)


BufferInfo = namedtuple("BufferInfo", "addr count dtype nbytes")
BufferInfo.__doc__ = """Where a contiguous array lives: address, elements, DType, bytes."""


def _numpy_info(x, dtype):
    if not x.flags.c_contiguous:
        raise ValueError("array must be C-contiguous (got strides %s)" % (x.strides,))
    if dtype is not None:
        dt = parse_dtype(dtype)
        if dt.itemsize != x.itemsize:
            raise TypeError("dtype %s has %d-byte elements but the array's %s has %d"
                            % (dt.name.lower(), dt.itemsize, x.dtype, x.itemsize))
    else:
        try:
            dt = _numpy_dtypes()[x.dtype]
        except KeyError:
            raise TypeError("numpy dtype %s is not supported by collectived (for bfloat16 pass "
                            "a uint16 array and dtype='bfloat16')" % x.dtype) from None
    return BufferInfo(x.__array_interface__["data"][0], x.size, dt, x.nbytes)


def _torch_info(x, dtype):
    if x.device.type != "cpu":
        raise ValueError("tensor must be on the CPU (got %s); collectived reduces pool memory"
                         % x.device)
    if not x.is_contiguous():
        raise ValueError("tensor must be contiguous")
    dt = parse_dtype(x.dtype if dtype is None else dtype)
    if dt.itemsize != x.element_size():
        raise TypeError("dtype %s does not match the tensor's %s" % (dt.name.lower(), x.dtype))
    return BufferInfo(x.data_ptr(), x.numel(), dt, x.numel() * x.element_size())


def is_tensor(x):
    """True when @x is a torch tensor (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def address(x):
    """Address of the first element of a numpy array or torch tensor (any strides)."""
    if is_tensor(x):
        return x.data_ptr()
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        return x.__array_interface__["data"][0]
    raise TypeError("expected a numpy array or torch tensor, got %s" % type(x).__name__)


def buffer_info(x, dtype=None):
    """The :class:`BufferInfo` of a numpy array or torch tensor.

    @dtype overrides the element type (same element size), e.g. ``"bfloat16"`` for a uint16
    numpy array. Raises TypeError for other objects or unsupported dtypes, ValueError for
    non-contiguous arrays and non-CPU tensors.
    """
    if is_tensor(x):
        return _torch_info(x, dtype)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        return _numpy_info(x, dtype)
    raise TypeError("expected a numpy array or torch tensor, got %s" % type(x).__name__)
