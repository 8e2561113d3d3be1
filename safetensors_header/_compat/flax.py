"""``safetensors.flax``: the reference's JAX API (``load_file``, ``save_file``, ``load``,
``save``), over `safetensors_header.jax`.

Layer: adapters (on `safetensors_header.jax` and `safe_open`).
"""

from __future__ import annotations

import os

from .._extras import optional_imports

with optional_imports("jax", "safetensors.flax"):
    import jax

from .. import jax as adapter
from ._errors import reference_errors
from ._open import safe_open
from ._serialize import TensorSpec, deserialize, serialize, serialize_file

__all__ = ["load", "load_file", "save", "save_file"]
# The reference's module has these too (code imports them from here).
__all__ += ["TensorSpec", "deserialize", "safe_open", "serialize", "serialize_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any


def save(tensors: dict[str, jax.Array], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file of these arrays (the reference's, byte for byte)."""
    data: bytes = _saved(adapter.save, tensors, metadata)
    return data


def save_file(
    tensors: dict[str, jax.Array],
    filename: str | os.PathLike[str],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write `save`'s bytes to `filename`, replaced whole (never left half-written)."""
    _saved(adapter.save_file, tensors, metadata, filename)


def _saved(write: Any, tensors: dict[str, jax.Array], metadata: Any, *to: Any) -> Any:
    """What `write` (the adapter's `save` or `save_file`) returns, its errors the reference's."""
    with reference_errors("serializing"):
        return write(tensors, *to, metadata=metadata)


def load_file(filename: Any) -> dict[str, jax.Array]:
    """The arrays of a file, by name, in the order of their data, on JAX's default device.
    `filename`: a local path, or beyond the reference any source `open_file` reads."""
    with safe_open(filename, "flax") as file:
        return file.get_tensors()


def load(data: bytes) -> dict[str, jax.Array]:
    """The arrays of a whole file's bytes."""
    with reference_errors("deserializing"):
        return adapter.load(data)
