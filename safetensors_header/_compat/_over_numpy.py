"""What the reference's TensorFlow, PaddlePaddle and MLX modules share, written once.

Layer: adapters (on `safetensors_header.numpy`, which reads and writes the arrays).

Each of those modules of the ``safetensors`` package hands its framework's tensors to numpy
and back; so do these, through `safetensors_header.numpy` (any source the project reads, the
header validated as the reference does, the reference's bytes written). A framework's module
says only how one of its tensors becomes a numpy array, how an array becomes one of its
tensors, and which safetensors dtypes it holds; choosing the backend, checking the dtypes
before any tensor is made, and the reference's error type are here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from typing import Any, Generic, TypeVar

from ..numpy import load as load_arrays
from ..numpy import safetensors_dtype
from ..numpy import save as save_arrays
from ..numpy import save_file as save_array_file
from ._errors import SafetensorError, reference_errors

__all__ = ["BACKENDS", "NUMBERS", "Framework", "load", "save", "save_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final

    from numpy.typing import NDArray

    from .._sources import Source

    #: (tensor name, tensor) -> its values as a numpy array (ml_dtypes' types for BF16, F8).
    ToArray = Callable[[str, Any], NDArray[Any]]

Tensor = TypeVar("Tensor")

#: The safetensors dtypes of numpy's own types (and ml_dtypes' bfloat16), which TensorFlow and
#: MLX hold too: ``bool``, the ints, the floats, ``complex64``.
NUMBERS: Final = frozenset(
    {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64"}
    | {"F16", "BF16", "F32", "F64", "C64"}
)

#: The reference's storage backends (``load_file(..., backend=)``) -> `numpy.load`'s ``mmap``:
#: a map of the file, or ``os.preadv`` into memory (the reference's ``pread(2)``).
BACKENDS: Final = {"mmap": None, "pread": False}


def _arrays(tensors: object, to_array: ToArray) -> dict[str, NDArray[Any]]:
    """Each tensor as a numpy array, in the mapping's order (the mapping is left as it was:
    the reference's TensorFlow module puts the arrays in it)."""
    if not isinstance(tensors, Mapping):
        kind = type(tensors).__name__
        raise TypeError(f"tensors must be a mapping of name to tensor, not {kind}")
    return {name: to_array(name, tensor) for name, tensor in tensors.items()}


def save(
    tensors: Mapping[str, Any], metadata: Mapping[str, str] | None, to_array: ToArray
) -> bytes:
    """The bytes of a safetensors file of these tensors, as the reference writes them."""
    with reference_errors("serializing"):
        return save_arrays(_arrays(tensors, to_array), metadata=metadata)


def save_file(
    tensors: Mapping[str, Any],
    filename: str | os.PathLike[str],
    metadata: Mapping[str, str] | None,
    to_array: ToArray,
) -> None:
    """Write these tensors to `filename` (replaced whole, never left half-written)."""
    with reference_errors("serializing"):
        save_array_file(_arrays(tensors, to_array), filename, metadata=metadata)


def load(
    source: Source,
    to_tensor: Callable[[NDArray[Any]], Tensor],
    holds: Collection[str],
    framework: str,
    *,
    backend: str = "mmap",
) -> dict[str, Tensor]:
    """Every tensor of a file, read as `safetensors_header.numpy.load` reads it, then made
    the framework's with `to_tensor`, in the file's order.

    Raises:
        SafetensorError: `backend` is neither ``"mmap"`` nor ``"pread"`` (the reference's
            message), or the file is not valid (`reference_errors`).
        TypeError: A tensor of a dtype the framework has not (not in `holds`), before any
            tensor is made; or as `safetensors_header.numpy.load` raises.
    """
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a str, not {type(backend).__name__}")
    if backend not in BACKENDS:
        raise SafetensorError(f'backend "{backend}" is invalid (expected one of: "mmap", "pread")')
    with reference_errors("deserializing"):
        arrays = load_arrays(source, mmap=BACKENDS[backend])
    for name, array in arrays.items():
        dtype = safetensors_dtype(array)
        if dtype not in holds:
            raise TypeError(
                f"tensor {name!r} is {dtype}, a dtype {framework} has not "
                f"(it holds {', '.join(sorted(holds))})"
            )
    tensors = {}
    for name in list(arrays):  # each array dropped once made, so that its memory may go
        tensors[name] = to_tensor(arrays.pop(name))
    return tensors


class Framework(Generic[Tensor]):
    """A framework's ``save``, ``save_file``, ``load`` and ``load_file``, as the reference's
    module for it has them: a module of this package binds them from one of these.

    Args:
        name: The framework, as its errors name it (``"TensorFlow"``).
        holds: The safetensors dtypes it has a dtype for; a file with another is refused
            (TypeError) before any tensor is made.
        to_array: (tensor name, tensor) -> its values as a numpy array.
        to_tensor: A numpy array -> the framework's tensor.
    """

    def __init__(
        self,
        name: str,
        holds: Collection[str],
        *,
        to_array: ToArray,
        to_tensor: Callable[[NDArray[Any]], Tensor],
    ) -> None:
        self.name, self.holds = name, holds
        self.to_array, self.to_tensor = to_array, to_tensor

    def save(
        self, tensors: Mapping[str, Tensor], metadata: Mapping[str, str] | None = None
    ) -> bytes:
        """The bytes of a safetensors file of these tensors: what the reference's ``save``
        makes of them (and metadata of at most one key, whose order the reference leaves to
        chance).

        Raises:
            SafetensorError: What the file's reader would refuse (a name ``__metadata__``...).
            TypeError: A tensor of a dtype safetensors has no name for, or the framework's
                module writes none of.
        """
        return save(tensors, metadata, self.to_array)

    def save_file(
        self,
        tensors: Mapping[str, Tensor],
        filename: str | os.PathLike[str],
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Write these tensors to a safetensors file, as `save` lays them out (replaced
        whole, never left half-written)."""
        save_file(tensors, filename, metadata, self.to_array)

    def load(self, data: Source) -> dict[str, Tensor]:
        """The tensors of a safetensors file, given as its bytes (or any source the project
        reads), as the framework's tensors, in the file's order.

        Raises:
            SafetensorError: The file is not valid (a `HeaderError` too, of its kind).
            TypeError: A dtype the framework has not.
        """
        return load(data, self.to_tensor, self.holds, self.name)

    def load_file(self, filename: Source, *, backend: str = "mmap") -> dict[str, Tensor]:
        """The tensors of a safetensors file, as `load` gives them; `backend` is the
        reference's: ``"mmap"`` maps the file, ``"pread"`` reads it."""
        return load(filename, self.to_tensor, self.holds, self.name, backend=backend)
