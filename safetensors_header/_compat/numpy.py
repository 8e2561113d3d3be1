"""``safetensors.numpy``: the reference's numpy API (``load_file``, ``save_file``, ``load``,
``save``), over `safetensors_header.numpy`.

Layer: adapters (on `safetensors_header.numpy` and `safe_open`).

Where the reference is wrong, this is right: it writes an array that is not in C order (a
Fortran-ordered or transposed array) with its bytes in memory order, so that its values read
back wrong; here every array is written in C order, its values as they are. BF16 and F8
arrays (ml_dtypes') are written too.
"""

from __future__ import annotations

import os

from .._extras import optional_imports

with optional_imports("numpy", "safetensors.numpy"):
    import numpy as np

from .. import numpy as adapter
from ._errors import SafetensorError, reference_errors
from ._open import safe_open
from ._serialize import TensorSpec, deserialize, serialize, serialize_file

__all__ = ["load", "load_file", "save", "save_file"]
# The reference's module has these too (code imports them from here).
__all__ += ["TensorSpec", "deserialize", "safe_open", "serialize", "serialize_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any

    from numpy.typing import NDArray


def _checked_arrays(tensor_dict: dict[str, NDArray[Any]]) -> dict[str, NDArray[Any]]:
    """Each array's dtype named, with the reference's error for one it cannot write."""
    refused = [
        (name, np.asarray(array).dtype.name)
        for name, array in tensor_dict.items()
        if not _named(array)
    ]
    if refused:
        name, dtype = refused[0]
        raise SafetensorError(f"Unknown dtype {dtype!r} (tensor {name!r})")
    return tensor_dict


def _named(array: Any) -> bool:
    """Whether safetensors has a name for the array's dtype."""
    try:
        adapter.safetensors_dtype(array)
    except TypeError:
        return False
    return True


def save(tensor_dict: dict[str, NDArray[Any]], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file of these arrays (the reference's, byte for byte, for
    any array in C order).

    Raises:
        SafetensorError: An array of a dtype safetensors has no name for; what the reference
            refuses to write (a name ``__metadata__``...).
    """
    with reference_errors("serializing"):
        return adapter.save(_checked_arrays(tensor_dict), metadata=metadata)


def save_file(
    tensor_dict: dict[str, NDArray[Any]],
    filename: str | os.PathLike[str],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write `save`'s bytes to `filename`, replaced whole (never left half-written)."""
    with reference_errors("serializing"):
        adapter.save_file(_checked_arrays(tensor_dict), filename, metadata=metadata)


def load_file(filename: Any, *, backend: str = "mmap") -> dict[str, NDArray[Any]]:
    """The arrays of a file, by name, in the order of their data: writable, each read into
    memory (as the reference's). `filename`: a local path, or beyond the reference any
    source `open_file` reads."""
    with safe_open(filename, "np", backend=backend) as file:
        return file.get_tensors()


def load(data: bytes) -> dict[str, NDArray[Any]]:
    """The arrays of a whole file's bytes, copied (writable, as the reference's)."""
    with reference_errors("deserializing"):
        arrays = adapter.load(data)
    return {name: array.copy() for name, array in arrays.items()}
