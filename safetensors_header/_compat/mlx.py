"""The reference's ``safetensors.mlx``: MLX arrays saved and loaded as the ``safetensors``
package does, through `safetensors_header.numpy`.

Layer: adapters (on `_compat._over_numpy`).

``save`` and ``save_file`` write the bytes the reference writes for the same arrays;
``load`` and ``load_file`` give the arrays (dtypes, shapes, values) its ``load_file`` gives:
an ``F64`` tensor becomes a ``float32`` array, as ``mlx.core.array`` makes one of a numpy
``float64`` array. Beyond the reference: every function takes any source the project reads
(a path, bytes, a URL...), and ``bfloat16`` arrays are written (the reference's cannot hand
them to numpy).

Needs MLX and numpy (``pip install 'safetensors_header[mlx]'``: on Linux, MLX's CPU build);
importing this module imports MLX.
"""

from __future__ import annotations

import os

from .._extras import missing

try:
    import mlx.core as mx
    import numpy as np
except ModuleNotFoundError as error:
    raise missing(error, "mlx", __name__) from None

from ..numpy import numpy_dtype
from . import _over_numpy

__all__ = ["load", "load_file", "save", "save_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final

    from numpy.typing import NDArray

    from .._sources import Source

#: The safetensors dtypes MLX has a dtype for (``F64`` as ``float32``); no F8.
HOLDS: Final = _over_numpy.NUMBERS


def save(tensors: dict[str, mx.array], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file of these arrays: what ``safetensors.mlx.save`` makes
    of them (and metadata of at most one key, whose order the reference leaves to chance).

    Raises:
        SafetensorError: What the file's reader would refuse (a name ``__metadata__``...).
    """
    return _over_numpy.save(tensors, metadata, _mlx_array)


def save_file(
    tensors: dict[str, mx.array],
    filename: str | os.PathLike[str],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write these arrays to a safetensors file, as `save` lays them out (replaced whole,
    never left half-written)."""
    _over_numpy.save_file(tensors, filename, metadata, _mlx_array)


def load(data: Source) -> dict[str, mx.array]:
    """The tensors of a safetensors file, given as its bytes (or any source the project
    reads), as MLX arrays in the file's order.

    Raises:
        SafetensorError: The file is not valid (its `HeaderError` as ``__cause__``).
        TypeError: A dtype MLX has not (``F8_*``, ``F4``, ``F6_*``).
    """
    return _over_numpy.load(data, mx.array, HOLDS, "MLX")


def load_file(filename: Source, *, backend: str = "mmap") -> dict[str, mx.array]:
    """The tensors of a safetensors file as MLX arrays, as `load` gives them; `backend` is
    the reference's: ``"mmap"`` maps the file, ``"pread"`` reads it."""
    return _over_numpy.load(filename, mx.array, HOLDS, "MLX", backend=backend)


def _mlx_array(name: str, tensor: Any) -> NDArray[Any]:
    """An array's values on the host; ``bfloat16`` through its bits (MLX gives numpy no
    ``bfloat16`` buffer: ml-explore/mlx#1296)."""
    if isinstance(tensor, mx.array) and tensor.dtype == mx.bfloat16:
        bits: NDArray[Any] = np.asarray(tensor.view(mx.uint16))
        return bits.view(numpy_dtype("BF16"))
    return np.asarray(tensor)
