"""The reference's ``safetensors.mlx``: MLX arrays saved and loaded as the ``safetensors``
package does, through `safetensors_header.numpy`.

Layer: adapters (on `_compat._over_numpy`).

``save`` and ``save_file`` write the bytes the reference writes for the same arrays;
``load`` and ``load_file`` give the arrays (dtypes, shapes, values) its ``load_file`` gives:
an ``F64`` tensor becomes a ``float32`` array, as ``mlx.core.array`` makes one of a numpy
``float64`` array. Beyond the reference: every function takes any source the project reads
(a path, bytes, a URL...), and ``bfloat16`` arrays are written (the reference's cannot hand
them to numpy). ``load`` refuses a file with a dtype MLX has not (``F8_*``, ``F4``,
``F6_*``: TypeError) before it makes any array.

Needs MLX and numpy (``pip install 'safetensors_header[mlx]'``: on Linux, MLX's CPU build);
importing this module imports MLX.
"""

from __future__ import annotations

from .._extras import optional_imports

with optional_imports("mlx", __name__):
    import mlx.core as mx
    import numpy as np

from ..numpy import numpy_dtype
from . import _over_numpy

__all__ = ["load", "load_file", "save", "save_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final

    from numpy.typing import NDArray


#: The safetensors dtypes MLX has a dtype for (``F64`` as ``float32``); no F8.
HOLDS: Final = _over_numpy.NUMBERS


def _mlx_array(name: str, tensor: Any) -> NDArray[Any]:
    """An array's values on the host; ``bfloat16`` through its bits (MLX gives numpy no
    ``bfloat16`` buffer: ml-explore/mlx#1296)."""
    if isinstance(tensor, mx.array) and tensor.dtype == mx.bfloat16:
        bits: NDArray[Any] = np.asarray(tensor.view(mx.uint16))
        return bits.view(numpy_dtype("BF16"))
    return np.asarray(tensor)


_MLX: Final = _over_numpy.Framework("MLX", HOLDS, to_array=_mlx_array, to_tensor=mx.array)
save, save_file = _MLX.save, _MLX.save_file
load, load_file = _MLX.load, _MLX.load_file
