"""Load safetensors tensors as numpy arrays (memory-mapped, validated, with BF16 and F8), and
save numpy arrays as safetensors files.

Layer: adapters (on the data path, `safetensors_header._fetch`, and the writer).

    >>> from safetensors_header.numpy import load, open_tensors, save_file
    >>> arrays = load("model.safetensors")  # doctest: +SKIP
    >>> arrays["lm_head.weight"].dtype  # doctest: +SKIP
    dtype(bfloat16)
    >>> tensors = open_tensors("https://host/model.safetensors")  # doctest: +SKIP
    >>> rows = tensors["lm_head.weight"][1024:2048]  # fetches those rows  # doctest: +SKIP
    >>> save_file(arrays, "copy.safetensors")  # the same bytes  # doctest: +SKIP

Needs numpy (``pip install 'safetensors_header[numpy]'``); ``BF16`` and ``F8_*`` tensors also
need ml_dtypes (``safetensors_header[ml-dtypes]``). Importing this module imports numpy.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ._extras import install_hint, optional_imports

with optional_imports("numpy", "safetensors_header.numpy"):
    import numpy as np

from ._core.fileformat import DTYPES, MAX_HEADER_SIZE
from ._core.header import Header, TensorInfo
from ._encode import dtype_name
from ._fetch import SafetensorsFile, chosen_tensors, open_to_load, opened
from ._loaders import LazyTensorBase, TensorsBase
from ._plan import ReadPlan
from ._ranks import rank_plan
from ._sources import Source
from ._sources.options import Options
from ._writer import file_bytes, write_file

__all__ = ["LazyTensor", "Tensors", "load", "load_plan", "load_rank", "numpy_dtype"]
__all__ += ["open_tensors", "safetensors_dtype", "save", "save_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from numpy.typing import NDArray
    from typing_extensions import Unpack

    from ._ranks import RankOptions
    from ._sources.transport import Transport


def safetensors_dtype(array_or_dtype: Any, /) -> str:
    """The safetensors dtype name of a numpy array or dtype: ``"F32"``, ``"BF16"``...

    The inverse of `numpy_dtype`: numpy's types by their kind and size (``float32`` is
    ``F32``, ``bool`` ``BOOL``, ``complex64`` ``C64``; either byte order), ml_dtypes' by
    name (``bfloat16`` is ``BF16``, ``float8_e4m3fn`` ``F8_E4M3``...).

    Raises:
        TypeError: A dtype safetensors has no name for (``complex128``, strings,
            objects...), or ml_dtypes' float4 and float6 types (safetensors packs their
            values several to a byte: write those as ``(dtype, shape, bytes)``).
    """
    if isinstance(array_or_dtype, (np.ndarray, np.generic)):
        return dtype_name(array_or_dtype.dtype)
    return dtype_name(np.dtype(array_or_dtype))


def save(
    tensors: Mapping[str, NDArray[Any]], /, *, metadata: Mapping[str, str] | None = None
) -> bytes:
    """The bytes of a safetensors file of these arrays: what `safetensors.numpy.save` makes
    for the same arrays (and metadata of at most one key, whose order the reference leaves
    to chance), and BF16 and F8 from ml_dtypes arrays as well. Each array is written with its
    dtype's safetensors name (`safetensors_dtype`) and its shape, little-endian, in C order.

    Raises:
        TypeError: An array of a dtype safetensors has no name for (the message names the
            tensor), a name or metadata that is not ``str``.
        HeaderError: What the file's reader would refuse (a name ``__metadata__``...).
    """
    return file_bytes(tensors, metadata=metadata)


def save_file(
    tensors: Mapping[str, NDArray[Any]],
    path: str | os.PathLike[str],
    /,
    *,
    metadata: Mapping[str, str] | None = None,
) -> Header:
    """Write these arrays to a safetensors file at `path`, as `save` lays them out, through
    `write_file` (replaced whole, never left half-written); returns its `Header`.

    ``save_file(load(path), other)`` writes the bytes of ``path`` again for any file this
    module loads (its metadata of at most one key).
    """
    return write_file(path, tensors, metadata=metadata)


def numpy_dtype(dtype: str, /) -> np.dtype[Any]:
    """The numpy dtype of a safetensors dtype name: little-endian, ml_dtypes' for BF16/F8.

    Little-endian always, as the file is, whatever the machine (``Dtype.numpy``); the types
    numpy lacks by their ml_dtypes names (``Dtype.ml_dtypes``).

    Raises:
        TypeError: ``F4`` or ``F6_*`` (packed several values to a byte, which numpy cannot
            express), or BF16/F8 without ml_dtypes installed, or an unknown name.
    """
    info = DTYPES.get(dtype)
    if info is None:
        raise TypeError(f"unknown safetensors dtype {dtype!r}")
    if info.numpy is not None:
        return np.dtype(info.numpy)
    if info.ml_dtypes is not None:
        try:
            import ml_dtypes  # optional: only BF16 and F8 need it
        except ImportError:
            raise TypeError(
                f"dtype {dtype} needs ml_dtypes for numpy, which is not installed: "
                f"{install_hint('ml-dtypes')} (or pass names= to load the other tensors)"
            ) from None
        found: np.dtype[Any] = np.dtype(getattr(ml_dtypes, info.ml_dtypes))
        return found
    assert info.packed  # every other dtype has a numpy or an ml_dtypes type (tests check)
    raise TypeError(
        f"dtype {dtype} packs several values into each byte, which no numpy dtype can "
        "express; read its bytes with safetensors_header.read_tensor (or pass names= to "
        "load the other tensors)"
    )


def load(
    source: Source,
    /,
    *,
    names: Iterable[str] | None = None,
    header: Header | None = None,
    mmap: bool | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    **transport: Unpack[Transport],
) -> dict[str, NDArray[Any]]:
    """Load tensors of a safetensors file as numpy arrays.

    The values, dtypes and shapes are those of ``safetensors.numpy.load_file`` (BF16 and F8
    through ml_dtypes). The header is validated as the reference does (`HeaderError`), and
    the data is read from the very file the header came from: a file replaced or rewritten
    in between raises (`RemoteError`, or `HeaderError` of kind ``FileChanged``).

    Every array is a view of the memory its bytes were read into, once: no copy follows
    the read. Adjacent tensors are read as one span (one request for a URL, or parallel
    parts of a long one: `Transport`'s ``part_size``), and their arrays share its buffer.

    Args:
        source: A local path: by default memory-mapped read-only, every array a view of
            the map, so nothing is read until used and the arrays are read-only
            (``.copy()`` one to change it); with ``mmap=False`` read into memory with
            ``os.preadv`` (writable arrays). A bytes-like object holding the whole file
            (``bytes``, ``bytearray``, ``memoryview``, ``mmap``): the arrays are views of
            it, without a copy. A binary file object (a stream that cannot seek too): the
            tensors are read into memory. An ``http(s)://`` URL, an fsspec URL or a
            ``(store, path)`` pair (as for `read_header`): the header, then only the chosen
            tensors' bytes, read into memory (writable arrays; obstore's buffers are
            read-only). A `SafetensorsFile` (from `open_file`, or ``Checkpoint.shards``):
            its header is not read again.
        names: The tensors to load (default: all), in the order of the result.
        header: The file's header, already read (``Checkpoint.files[shard]``, say): not read
            again (for a URL or an object store, one request saved). It must be the header
            of this very file: the file's size is checked against it.
        mmap: For a local path: map the file (the default) or read it (``False``).
        max_header_size: The largest header length accepted; see `parse_header`.
        **transport: How a URL or an object store is reached (`Transport`): ``timeout``
            bounds the whole read of the tensors (none by default; the header's read has
            its own, 10 s unless this is given); a local file read into memory is spread
            over at most ``max_workers`` cores.

    Returns:
        Tensor name -> array, in the file's order (or the order of `names`).

    Raises:
        HeaderError: The file is not valid (as for `read_header`), ended before its data
            did, or changed (``FileChanged``).
        KeyError: A name in `names` is not in the file.
        TypeError: A tensor's dtype has no numpy equivalent (``F4``, ``F6_*``), or BF16/F8
            without ml_dtypes: see `numpy_dtype`.
        RemoteError: For URLs and object stores, as for `read_ranges`.
    """
    file, mapped = open_to_load(
        "load", source, transport, header=header, max_header_size=max_header_size, mmap=mmap
    )
    chosen = chosen_tensors(file.header, names)
    dtypes = [numpy_dtype(info.dtype) for info in chosen]  # refuse before reading anything
    if mapped is not None:  # views of one read-only map of the file whose header was read
        buffer = np.frombuffer(mapped, dtype=np.uint8)
        return {
            info.name: buffer[info.start : info.end].view(dtype).reshape(info.shape)
            for info, dtype in zip(chosen, dtypes, strict=True)
        }
    pieces = file.read_tensors(chosen, timeout=transport.get("timeout"))
    return {
        info.name: np.frombuffer(pieces[info.name], dtype=dtype).reshape(info.shape)
        for info, dtype in zip(chosen, dtypes, strict=True)
    }


def open_tensors(
    source: Source,
    /,
    *,
    header: Header | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    gap: int | None = None,
    **transport: Unpack[Transport],
) -> Tensors:
    """The tensors of a file, each read only when (and as far as) it is indexed.

    Reads the header now (as `read_header` does, and validated), nothing else:
    ``tensors[name][key]`` then fetches only the bytes of that selection, as few requests
    as `read_ranges` needs (numpy basic indexing: ints, slices with any step, ``...``),
    and ``tensors[name][...]`` or ``numpy.asarray(tensors[name])`` the whole tensor. A
    tensor-parallel rank reads its rows with ``tensors[name][rank * n : (rank + 1) * n]``.
    Every read is checked to be of the file the header came from.

    Args: as for `load` (`header`: the file's header, already read, so that nothing is read
    now); `source` is any source `read_ranges` takes, and `gap` is its option (runs of a
    selection less than `gap` bytes apart are one request).
    """
    options = Options.given("open_tensors", transport, timeout=None, gap=gap)
    file = opened(source, options, header=header, max_header_size=max_header_size)
    return Tensors(file, timeout=options.timeout)


class Tensors(TensorsBase["LazyTensor"]):
    """Tensor name -> `LazyTensor`, in the file's order; made by `open_tensors`.

    Attributes:
        header: The file's `Header`.
        file: The `SafetensorsFile` its tensors are read from.
    """

    __slots__ = ("_timeout",)

    def __init__(self, file: SafetensorsFile, *, timeout: float | None = None) -> None:
        super().__init__(file)
        self._timeout = timeout

    def _lazy(self, info: TensorInfo) -> LazyTensor:
        return LazyTensor(info, self.file, timeout=self._timeout)


class LazyTensor(LazyTensorBase):
    """One tensor of a file, not read yet: index it to read (part of) it as an array.

    Attributes:
        info: Its `TensorInfo` (name, dtype name, shape, byte range).
    """

    __slots__ = ("_file", "_timeout")

    def __init__(
        self, info: TensorInfo, file: SafetensorsFile, *, timeout: float | None = None
    ) -> None:
        super().__init__(info)
        self._file = file
        self._timeout = timeout

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype (TypeError for F4/F6, or BF16/F8 without ml_dtypes)."""
        return numpy_dtype(self.info.dtype)

    def __getitem__(self, key: object) -> NDArray[Any]:
        """``tensor[key]`` (numpy basic indexing), reading only its bytes."""
        dtype = self.dtype
        # The selection's shape as numpy gives it, from a view that holds no data (this also
        # checks the key before anything is read).
        empty = np.broadcast_to(np.empty((), dtype=np.uint8), self.info.shape)
        shape = empty[key].shape  # type: ignore[call-overload]
        data = self._file.read_tensor(self.info, key, timeout=self._timeout)
        return np.frombuffer(data, dtype=dtype).reshape(shape)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> NDArray[Any]:
        array = self[...]
        return array if dtype is None else array.astype(dtype)


def load_plan(plan: ReadPlan, /, *, timeout: float | None = None) -> dict[str, NDArray[Any]]:
    """Execute a `ReadPlan`: each tensor's selection as an array, by name.

    The arrays have the tensors' dtypes (see `numpy_dtype`) and the selections' shapes; each
    wraps the buffer its bytes were read into (no copy). Raises as `ReadPlan.read`, and
    TypeError for a dtype numpy cannot hold (checked before anything is read).
    """
    dtypes = {tensor.name: numpy_dtype(tensor.dtype) for tensor in plan.tensors}
    buffers = plan.read(timeout=timeout)
    return {
        tensor.name: np.frombuffer(buffers[tensor.name], dtypes[tensor.name]).reshape(tensor.shape)
        for tensor in plan.tensors
    }


def load_rank(
    source: Any, /, rank: int, world: int, **options: Unpack[RankOptions]
) -> dict[str, NDArray[Any]]:
    """Rank `rank` of `world`'s share of every tensor of a file or a checkpoint, as arrays.

    Each tensor is whole, or the part of it that the rules of tensor parallelism for the
    model's architecture name (`plan_rank`: by its config.json, beside the source or given,
    else by the names), cut as ``numpy.array_split(tensor, world, axis)[rank]`` (a fused QKV
    part by part); only those bytes are read, with the gaps between them joined as `gap`,
    `max_over_read` and `max_requests` say (see `plan_reads`). A tensor no rule decides is
    whole, with a warning, or refused with `strict`.

    Args:
        source: A `Checkpoint`, a `SafetensorsFile`, a checkpoint's directory or index
            (a path or a URL ending in ``.json``), or any source `open_file` takes.
        **options: `plan_rank`'s keywords (``config``, ``axes``, ``strict``, ``gap``,
            ``max_over_read``, ``max_requests``) and how the source is reached
            (`Transport`); ``timeout`` bounds the reads of the data (none by default).
    """
    plan = rank_plan("load_rank", source, rank, world, options)
    return load_plan(plan, timeout=options.get("timeout"))
