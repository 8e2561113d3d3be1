"""The reference's ``safetensors.paddle``: PaddlePaddle tensors saved and loaded as the
``safetensors`` package does, through `safetensors_header.numpy`.

Layer: adapters (on `_compat._over_numpy`).

``save`` and ``save_file`` write the bytes the reference writes for the same tensors;
``load`` and ``load_file`` give the tensors (dtypes, shapes, values) its ``load_file`` gives,
on the ``device`` asked for. The dtypes are the reference's: ``bool``, ``uint8``, the signed
ints, ``float16``, ``bfloat16``, ``float32``, ``float64``, ``complex64``, ``float8_e4m3fn``,
``float8_e5m2`` (not PaddlePaddle's ``uint16``, ``uint32``, ``uint64``, ``complex128``).
Beyond the reference: every function takes any source the project reads (a path, bytes, a
URL...), and ``load`` of bytes reads ``C64`` (the reference's needs ``load_file``). A tensor
that is not on the CPU, or not contiguous, is copied to the host to be written.

Needs PaddlePaddle, numpy and ml_dtypes (``pip install 'safetensors_header[paddle]'``);
importing this module imports PaddlePaddle.
"""

from __future__ import annotations

from .._extras import optional_imports

with optional_imports("paddle", __name__):
    import numpy as np
    import paddle

from ..numpy import numpy_dtype, safetensors_dtype
from . import _over_numpy

__all__ = ["load", "load_file", "save", "save_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final

    from numpy.typing import NDArray

    from .._sources import Source

#: PaddlePaddle's dtypes -> their safetensors names: the reference's table. PaddlePaddle
#: hands numpy its ``bfloat16`` as ``uint16`` and its F8 as ``int8``: those are viewed as
#: ml_dtypes' types, and made from those bits again.
NAMES: Final = {
    paddle.bool: "BOOL",
    paddle.uint8: "U8",
    paddle.int8: "I8",
    paddle.int16: "I16",
    paddle.float16: "F16",
    paddle.bfloat16: "BF16",
    paddle.int32: "I32",
    paddle.float32: "F32",
    paddle.complex64: "C64",
    paddle.int64: "I64",
    paddle.float64: "F64",
    paddle.float8_e4m3fn: "F8_E4M3",
    paddle.float8_e5m2: "F8_E5M2",
}
#: The safetensors names whose numpy bits PaddlePaddle reads as another dtype, -> that one.
_VIEWED: Final = {
    "BF16": (np.uint16, paddle.bfloat16),
    "F8_E4M3": (np.int8, paddle.float8_e4m3fn),
    "F8_E5M2": (np.int8, paddle.float8_e5m2),
}
HOLDS: Final = frozenset(NAMES.values())


def load(data: Source, device: str = "cpu") -> dict[str, paddle.Tensor]:
    """The tensors of a safetensors file, given as its bytes (or any source the project
    reads), as PaddlePaddle tensors on `device` (``"cpu"``, ``"gpu:0"``...), in the file's
    order.

    Raises:
        SafetensorError: The file is not valid (a `HeaderError` too, of its kind).
        TypeError: A dtype the reference does not read (``U16``, ``F8_E8M0``...).
    """
    return _over_numpy.load(data, _tensor_on(device), HOLDS, _PADDLE.name)


def load_file(
    filename: Source, device: str = "cpu", *, backend: str = "mmap"
) -> dict[str, paddle.Tensor]:
    """The tensors of a safetensors file as PaddlePaddle tensors on `device`, as `load`
    gives them; `backend` is the reference's: ``"mmap"`` maps the file, ``"pread"`` reads
    it."""
    return _over_numpy.load(filename, _tensor_on(device), HOLDS, _PADDLE.name, backend=backend)


def _paddle_array(name: str, tensor: Any) -> NDArray[Any]:
    if not isinstance(tensor, paddle.Tensor):
        raise TypeError(f"tensor {name!r} is a {type(tensor).__name__}, not a paddle.Tensor")
    dtype = NAMES.get(tensor.dtype)
    if dtype is None:
        # (By its enum's name: PaddlePaddle prints its uint16 as "paddle.bfloat16".)
        shown = str(getattr(tensor.dtype, "name", tensor.dtype)).lower()
        raise TypeError(
            f"tensor {name!r}: the reference writes no {shown} tensor (its dtypes: "
            f"{', '.join(sorted(HOLDS))})"
        )
    array: NDArray[Any] = tensor.numpy()
    return array.view(numpy_dtype(dtype)) if dtype in _VIEWED else array


def _tensor_on(device: str) -> Any:
    """A function that makes a numpy array a tensor on `device`: made on the CPU, then moved
    there, as the reference does."""

    def tensor(array: NDArray[Any]) -> paddle.Tensor:
        viewed = _VIEWED.get(safetensors_dtype(array))
        if viewed is None:
            made = paddle.to_tensor(array, place="cpu")
        else:
            bits, dtype = viewed
            made = paddle.to_tensor(array.view(bits), place="cpu").view(dtype)
        return made if device == "cpu" else made.to(device)

    return tensor


_PADDLE: Final = _over_numpy.Framework(
    "PaddlePaddle", HOLDS, to_array=_paddle_array, to_tensor=_tensor_on("cpu")
)
save, save_file = _PADDLE.save, _PADDLE.save_file
