"""The reference's ``safetensors.tensorflow``: TensorFlow tensors saved and loaded as the
``safetensors`` package does, through `safetensors_header.numpy`.

Layer: adapters (on `_compat._over_numpy`).

``save`` and ``save_file`` write the bytes the reference writes for the same tensors;
``load`` and ``load_file`` give the tensors (dtypes, shapes, values) its ``load_file`` gives.
Beyond the reference: every function takes any source the project reads (a path, bytes, a
URL...); ``load`` of bytes reads BF16 (the reference's needs ``load_file``); F8 tensors load
(the reference's refuses them: "numpy has no attribute float8_e4m3fn"); the mapping given to
``save`` is left as it was (the reference's puts numpy arrays in it).

Needs TensorFlow (``pip install 'safetensors_header[tensorflow]'``), which brings numpy and
ml_dtypes; importing this module imports TensorFlow.
"""

from __future__ import annotations

import os

from .._extras import missing

try:
    import tensorflow as tf
except ModuleNotFoundError as error:
    raise missing(error, "tensorflow", __name__) from None

import numpy as np  # (TensorFlow's own dependency)

from . import _over_numpy

__all__ = ["load", "load_file", "save", "save_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final

    from numpy.typing import NDArray

    from .._sources import Source

#: The safetensors dtypes TensorFlow has a dtype for: numpy's and four of the five F8 (not
#: ``F8_E8M0``; ``F4`` and ``F6_*`` no numpy array holds).
HOLDS: Final = _over_numpy.NUMBERS | {"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"}


def save(tensors: dict[str, tf.Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file of these tensors: what ``safetensors.tensorflow.save``
    makes of them (and metadata of at most one key, whose order the reference leaves to
    chance). Each tensor is written with its values as numpy has them (``.numpy()``).

    Raises:
        SafetensorError: What the file's reader would refuse (a name ``__metadata__``...).
        TypeError: A tensor of a dtype safetensors has no name for (``complex128``...).
    """
    return _over_numpy.save(tensors, metadata, _tf_array)


def save_file(
    tensors: dict[str, tf.Tensor],
    filename: str | os.PathLike[str],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write these tensors to a safetensors file, as `save` lays them out (replaced whole,
    never left half-written)."""
    _over_numpy.save_file(tensors, filename, metadata, _tf_array)


def load(data: Source) -> dict[str, tf.Tensor]:
    """The tensors of a safetensors file, given as its bytes (or any source the project
    reads), as TensorFlow tensors in the file's order.

    Raises:
        SafetensorError: The file is not valid (its `HeaderError` as ``__cause__``).
        TypeError: A dtype TensorFlow has not (``F8_E8M0``, ``F4``, ``F6_*``).
    """
    return _over_numpy.load(data, tf.convert_to_tensor, HOLDS, "TensorFlow")


def load_file(filename: Source, *, backend: str = "mmap") -> dict[str, tf.Tensor]:
    """The tensors of a safetensors file as TensorFlow tensors, as `load` gives them;
    `backend` is the reference's: ``"mmap"`` maps the file, ``"pread"`` reads it."""
    return _over_numpy.load(filename, tf.convert_to_tensor, HOLDS, "TensorFlow", backend=backend)


def _tf_array(name: str, tensor: Any) -> NDArray[Any]:
    """A tensor's values on the host (ml_dtypes' types for BF16 and F8, as TensorFlow's)."""
    return np.asarray(tensor)
