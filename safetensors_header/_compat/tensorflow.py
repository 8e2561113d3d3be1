"""The reference's ``safetensors.tensorflow``: TensorFlow tensors saved and loaded as the
``safetensors`` package does, through `safetensors_header.numpy`.

Layer: adapters (on `_compat._over_numpy`).

``save`` and ``save_file`` write the bytes the reference writes for the same tensors;
``load`` and ``load_file`` give the tensors (dtypes, shapes, values) its ``load_file`` gives.
Beyond the reference: every function takes any source the project reads (a path, bytes, a
URL...); ``load`` of bytes reads BF16 (the reference's needs ``load_file``); F8 tensors load
(the reference's refuses them: "numpy has no attribute float8_e4m3fn"); the mapping given to
``save`` is left as it was (the reference's puts numpy arrays in it). Each tensor is written
with its values as numpy has them (``.numpy()``); ``load`` refuses a file with a dtype
TensorFlow has not (``F8_E8M0``, ``F4``, ``F6_*``: TypeError) before it makes any tensor.

Needs TensorFlow (``pip install 'safetensors_header[tensorflow]'``), which brings numpy and
ml_dtypes; importing this module imports TensorFlow.
"""

from __future__ import annotations

from .._extras import optional_imports

with optional_imports("tensorflow", __name__):
    import tensorflow as tf

import numpy as np  # (TensorFlow's own dependency)

from . import _over_numpy

__all__ = ["load", "load_file", "save", "save_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final

    from numpy.typing import NDArray


#: The safetensors dtypes TensorFlow has a dtype for: numpy's and four of the five F8 (not
#: ``F8_E8M0``; ``F4`` and ``F6_*`` no numpy array holds).
HOLDS: Final = _over_numpy.NUMBERS | {"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"}


def _tf_array(name: str, tensor: Any) -> NDArray[Any]:
    """A tensor's values on the host (ml_dtypes' types for BF16 and F8, as TensorFlow's)."""
    return np.asarray(tensor)


_TENSORFLOW: Final = _over_numpy.Framework(
    "TensorFlow", HOLDS, to_array=_tf_array, to_tensor=tf.convert_to_tensor
)
save, save_file = _TENSORFLOW.save, _TENSORFLOW.save_file
load, load_file = _TENSORFLOW.load, _TENSORFLOW.load_file
