"""Load safetensors tensors as JAX arrays, from any source, placed where a sharding says; and
save JAX arrays as safetensors files, byte for byte as ``safetensors.flax``.

Layer: adapters (on `safetensors_header.numpy`, which reads the tensors).

    >>> from safetensors_header.jax import load, open_tensors
    >>> arrays = load("model.safetensors")  # doctest: +SKIP
    >>> arrays["lm_head.weight"].dtype  # doctest: +SKIP
    dtype(bfloat16)
    >>> tensors = open_tensors("https://host/model.safetensors")  # doctest: +SKIP
    >>> rows = tensors["lm_head.weight"][:1024]  # fetches those rows  # doctest: +SKIP

Needs JAX (``pip install 'safetensors_header[jax]'``: JAX needs Python 3.11 or newer), which
brings numpy and ml_dtypes; not the ``safetensors`` package. Importing this module imports
JAX.

The arrays are JAX's: with JAX's default configuration a 64-bit tensor (``F64``, ``I64``,
``U64``) becomes a 32-bit array, as ``safetensors.flax`` gives it; set
``jax.config.update("jax_enable_x64", True)`` to keep 64 bits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ._extras import optional_imports

with optional_imports("jax", "safetensors_header.jax"):
    import jax
    import jax.numpy as jnp

import numpy as np  # (JAX's own dependency)

from ._core.fileformat import MAX_HEADER_SIZE
from ._loaders import LazyTensorBase, TensorsBase
from ._ranks import rank_plan
from .numpy import LazyTensor as NumpyTensor
from .numpy import Tensors as NumpyTensors
from .numpy import load as load_arrays
from .numpy import load_plan as load_plan_arrays
from .numpy import open_tensors as open_arrays
from .numpy import save as save_arrays
from .numpy import save_file as save_array_file

__all__ = ["LazyTensor", "Tensors", "load", "load_plan", "load_rank", "open_tensors", "save"]
__all__ += ["save_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, TypeAlias

    from numpy.typing import NDArray
    from typing_extensions import Unpack

    from ._core.header import Header, TensorInfo
    from ._ranks import RankOptions
    from ._sources import Source
    from ._sources.transport import Transport
    from .plan import ReadPlan

    #: Where an array goes: a `jax.sharding.Sharding` (or a device) for every tensor, or
    #: one per tensor name (a name left out goes to JAX's default device).
    Placement: TypeAlias = (
        jax.sharding.Sharding | jax.Device | Mapping[str, jax.sharding.Sharding | jax.Device]
    )


def load(
    source: Source,
    /,
    *,
    names: Iterable[str] | None = None,
    sharding: Placement | None = None,
    header: Header | None = None,
    mmap: bool | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    **transport: Unpack[Transport],
) -> dict[str, jax.Array]:
    """Load tensors of a safetensors file as JAX arrays.

    The values, dtypes and shapes are those of ``safetensors.flax.load_file``, which reads
    no float8 tensor (here each is its ml_dtypes type: ``F8_E4M3`` is ``float8_e4m3fn``...).
    The file is read as `safetensors_header.numpy.load` reads it (any source, the header
    validated, the data from the very file the header came from, each byte copied once),
    then each array is put on its device, or laid out by its sharding, with
    ``jax.device_put``.

    Args:
        source, names, header, mmap, max_header_size, **transport: As for
            `safetensors_header.numpy.load`.
        sharding: Where the arrays go: a ``jax.sharding.Sharding`` (a ``NamedSharding``
            over a mesh...) or a ``jax.Device`` for every array, or a mapping of tensor name
            to one (the others go to JAX's default device). Default: JAX's default device.

    Returns:
        Tensor name -> ``jax.Array``, in the file's order (or the order of `names`).

    Raises:
        HeaderError: As for `safetensors_header.numpy.load` (and `RemoteError`, KeyError).
        TypeError: ``F4`` and ``F6_*``, packed several values to a byte, which JAX holds one
            a byte (checked before anything is read).
        ValueError: A sharding that does not fit an array's shape: ``jax.device_put``'s
            error (an AssertionError in JAX 0.10).
    """
    arrays = load_arrays(
        source,
        names=names,
        header=header,
        mmap=mmap,
        max_header_size=max_header_size,
        **transport,
    )
    return _placed(arrays, sharding)


def _placed(arrays: dict[str, NDArray[Any]], sharding: Placement | None) -> dict[str, jax.Array]:
    """Each array on its device, or laid out by its sharding (the numpy array then dropped,
    so that its memory may go while the next is placed)."""
    placed = {}
    for name in list(arrays):
        placed[name] = _put(name, arrays.pop(name), sharding)
    return placed


def _put(name: str, array: NDArray[Any], sharding: Placement | None) -> jax.Array:
    where = sharding.get(name) if isinstance(sharding, Mapping) else sharding
    if where is None:
        return jnp.asarray(array)
    placed: jax.Array = jax.device_put(array, where)
    return placed


def open_tensors(
    source: Source,
    /,
    *,
    sharding: Placement | None = None,
    header: Header | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    gap: int | None = None,
    **transport: Unpack[Transport],
) -> Tensors:
    """The tensors of a file, each read only when (and as far as) it is indexed:
    ``tensors[name][key]`` reads only the bytes of that selection (numpy's basic indexing)
    and gives a JAX array of it, placed as `sharding` says (see `load`); ``tensors[name][...]``
    is the whole tensor. See `safetensors_header.numpy.open_tensors`, which reads them.
    """
    arrays = open_arrays(
        source, header=header, max_header_size=max_header_size, gap=gap, **transport
    )
    return Tensors(arrays, sharding=sharding)


class Tensors(TensorsBase["LazyTensor"]):
    """Tensor name -> `LazyTensor`, in the file's order; made by `open_tensors`.

    Attributes:
        header: The file's `Header`.
        file: The `SafetensorsFile` its tensors are read from.
    """

    __slots__ = ("_arrays", "_sharding")

    def __init__(self, arrays: NumpyTensors, *, sharding: Placement | None = None) -> None:
        super().__init__(arrays.file)
        self._arrays = arrays
        self._sharding = sharding

    def _lazy(self, info: TensorInfo) -> LazyTensor:
        return LazyTensor(self._arrays[info.name], sharding=self._sharding)


class LazyTensor(LazyTensorBase):
    """One tensor of a file, not read yet: index it to read (part of) it as a JAX array.

    Attributes:
        info: Its `TensorInfo` (name, dtype name, shape, byte range).
    """

    __slots__ = ("_array", "_sharding")

    def __init__(self, array: NumpyTensor, *, sharding: Placement | None = None) -> None:
        super().__init__(array.info)
        self._array = array
        self._sharding = sharding

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of its values, which is JAX's (ml_dtypes' for BF16 and F8)."""
        return self._array.dtype

    def __getitem__(self, key: object) -> jax.Array:
        """``tensor[key]`` (numpy's basic indexing), reading only its bytes."""
        return _put(self.info.name, self._array[key], self._sharding)


def load_plan(
    plan: ReadPlan, /, *, sharding: Placement | None = None, timeout: float | None = None
) -> dict[str, jax.Array]:
    """Execute a `ReadPlan`: each tensor's selection as a JAX array, by name, placed as
    `sharding` says (see `load`). See `safetensors_header.numpy.load_plan`."""
    return _placed(load_plan_arrays(plan, timeout=timeout), sharding)


def load_rank(
    source: Any,
    /,
    rank: int,
    world: int,
    *,
    sharding: Placement | None = None,
    **options: Unpack[RankOptions],
) -> dict[str, jax.Array]:
    """Rank `rank` of `world`'s share of every tensor of a file or a checkpoint, as JAX
    arrays placed as `sharding` says (see `load`): only those bytes are read. See
    `safetensors_header.numpy.load_rank` for the split and the other arguments."""
    plan = rank_plan("load_rank", source, rank, world, options)
    return _placed(load_plan_arrays(plan, timeout=options.get("timeout")), sharding)


def save(
    tensors: Mapping[str, jax.Array], /, *, metadata: Mapping[str, str] | None = None
) -> bytes:
    """The bytes of a safetensors file of these arrays: what ``safetensors.flax.save`` makes
    for the same arrays (and metadata of at most one key, whose order the reference leaves
    to chance). Each array is fetched to the host (``numpy.asarray``) and written as
    `safetensors_header.numpy.save` writes it; raises as it does."""
    return save_arrays(_host(tensors), metadata=metadata)


def save_file(
    tensors: Mapping[str, jax.Array],
    path: str | os.PathLike[str],
    /,
    *,
    metadata: Mapping[str, str] | None = None,
) -> Header:
    """Write these arrays to a safetensors file at `path`, as `save` lays them out (replaced
    whole, never left half-written); returns its `Header`."""
    return save_array_file(_host(tensors), path, metadata=metadata)


def _host(tensors: Mapping[str, jax.Array]) -> dict[str, NDArray[Any]]:
    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensors must be a mapping of name to array, not {type(tensors).__name__}")
    return {name: np.asarray(array) for name, array in tensors.items()}
