"""Load safetensors tensors as numpy arrays: memory-mapped, validated, with BF16 and F8.

    >>> from safetensors_header.numpy import load, open_tensors
    >>> arrays = load("model.safetensors")  # doctest: +SKIP
    >>> arrays["lm_head.weight"].dtype  # doctest: +SKIP
    dtype(bfloat16)
    >>> tensors = open_tensors("https://host/model.safetensors")  # doctest: +SKIP
    >>> rows = tensors["lm_head.weight"][1024:2048]  # doctest: +SKIP  (fetches those rows)

Needs numpy (``pip install 'safetensors_header[numpy]'``); ``BF16`` and ``F8_*`` tensors also
need ml_dtypes (``safetensors_header[ml-dtypes]``). Importing this module imports numpy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

import numpy as np

from ._errors import HeaderError
from ._fetch import header_for_data, read_ranges
from ._format import DTYPES, MAX_HEADER_SIZE
from ._header import Header, TensorInfo, shown_shape
from ._sources import RETRIES, Source, in_store, is_url, read_at_most

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from numpy.typing import NDArray

__all__ = ["LazyTensor", "Tensors", "load", "numpy_dtype", "open_tensors"]


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
                f"dtype {dtype} needs ml_dtypes for numpy: pip install ml-dtypes "
                "(or pass names= to load the other tensors)"
            ) from None
        found: np.dtype[Any] = np.dtype(getattr(ml_dtypes, info.ml_dtypes))
        return found
    assert info.packed  # every other dtype has a numpy or an ml_dtypes type (tests check)
    raise TypeError(
        f"dtype {dtype} packs several values into each byte, which no numpy dtype can "
        "express; read its bytes with TensorInfo.byte_ranges (or pass names= to load "
        "the other tensors)"
    )


def load(
    source: Source,
    /,
    names: Iterable[str] | None = None,
    *,
    header: Header | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    retries: int = RETRIES,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, NDArray[Any]]:
    """Load tensors of a safetensors file as numpy arrays.

    The values, dtypes and shapes are those of ``safetensors.numpy.load_file`` (which stops
    at BF16 and F8; here they load through ml_dtypes). The header is validated as the
    reference does (`HeaderError`).

    Args:
        source: A local path: the file is memory-mapped read-only and every array is a view
            of the map, so nothing is read until used and the arrays are read-only
            (``.copy()`` one to change it). A bytes-like object holding the whole file
            (``bytes``, ``bytearray``, ``memoryview``, ``mmap``): the arrays are views of it,
            without a copy. A binary file object: the tensors are read into memory. An
            ``http(s)://`` URL, an fsspec URL or a ``(store, path)`` pair (as for
            `read_header`): the header, then only the chosen tensors' bytes, with
            `read_ranges` (adjacent tensors in one request); the arrays are read-only.
        names: The tensors to load (default: all), in the order of the result.
        header: The file's header, already read (``Checkpoint.files[shard]``, say): for a
            URL or an object store it is not read again (one request saved). It must be the
            header of this very file: only the ends of the ranges are checked.
        max_header_size: The largest header length accepted; see `parse_header`.
        headers, retries: For http(s) URLs, as for `read_header`.
        timeout: For http(s) URLs: seconds the whole read of the tensors may take (the
            header's read has its own, 10 s unless this is given); ``None``: no bound.
        storage_options: For fsspec URLs, as for `read_header`.

    Returns:
        Tensor name -> array, in the file's order (or the order of `names`).

    Raises:
        HeaderError: The file is not valid (as for `read_header`), or a file object ended
            before its data did.
        KeyError: A name in `names` is not in the file.
        TypeError: A tensor's dtype has no numpy equivalent (``F4``, ``F6_*``), or BF16/F8
            without ml_dtypes: see `numpy_dtype`.
        RemoteError: For URLs and object stores, as for `read_ranges`.
    """
    remote = _remote(source)
    if header is None or not remote:
        header = header_for_data(
            source,
            max_header_size=max_header_size,
            headers=headers,
            timeout=timeout,
            retries=retries,
            storage_options=storage_options,
        )
    chosen = _choose(header, names)
    dtypes = [numpy_dtype(info.dtype) for info in chosen]  # refuse before reading anything
    if remote:
        pieces = read_ranges(
            source,
            [(info.start, info.nbytes) for info in chosen],
            headers=headers,
            timeout=timeout,
            retries=retries,
            storage_options=storage_options,
        )
        return {
            info.name: np.frombuffer(piece, dtype=dtype).reshape(info.shape)
            for info, piece, dtype in zip(chosen, pieces, dtypes, strict=True)
        }
    if isinstance(source, (str, os.PathLike)):
        # The whole file, mapped: slicing it reads nothing; pages are read when touched.
        buffer: NDArray[np.uint8] = np.asarray(np.memmap(source, dtype=np.uint8, mode="r"))
        if buffer.size != header.file_size:
            raise HeaderError(
                "MetadataIncompleteBuffer",
                f"the file is {buffer.size} bytes now, but was {header.file_size} when its "
                "header was read: it changed in between",
            )
    else:
        try:
            view = memoryview(source)  # type: ignore[arg-type]
        except TypeError:  # a file object
            chunks = _read_file(source, header, chosen)
            return {
                info.name: chunk.view(dtype).reshape(info.shape)
                for info, chunk, dtype in zip(chosen, chunks, dtypes, strict=True)
            }
        buffer = np.frombuffer(view, dtype=np.uint8)
    return {
        info.name: buffer[info.start : info.end].view(dtype).reshape(info.shape)
        for info, dtype in zip(chosen, dtypes, strict=True)
    }


def open_tensors(
    source: Source,
    /,
    *,
    header: Header | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    gap: int | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    retries: int = RETRIES,
    storage_options: Mapping[str, Any] | None = None,
) -> Tensors:
    """The tensors of a file, each read only when (and as far as) it is indexed.

    Reads the header now (as `read_header` does, and validated), nothing else:
    ``tensors[name][key]`` then fetches only the bytes of that selection, as few requests
    as `read_ranges` needs (numpy basic indexing: ints, slices with any step, ``...``),
    and ``tensors[name][...]`` or ``numpy.asarray(tensors[name])`` the whole tensor. A
    tensor-parallel rank reads its rows with ``tensors[name][rank * n : (rank + 1) * n]``.

    Args: as for `load` (`header`: the file's header, already read, so that nothing is read
    now); `source` is any source `read_ranges` takes, and `gap` is its option (runs of a
    selection less than `gap` bytes apart are one request).
    """
    if header is None:
        header = header_for_data(
            source,
            max_header_size=max_header_size,
            headers=headers,
            timeout=timeout,
            retries=retries,
            storage_options=storage_options,
        )
    options = {"gap": gap, "headers": headers, "timeout": timeout, "retries": retries}
    return Tensors(header, source, {**options, "storage_options": storage_options})


class Tensors(Mapping[str, "LazyTensor"]):
    """Tensor name -> `LazyTensor`, in the file's order; made by `open_tensors`.

    Attributes:
        header: The file's `Header`.
    """

    __slots__ = ("_options", "_source", "header")

    def __init__(self, header: Header, source: Source, options: dict[str, Any]) -> None:
        self.header = header
        self._source = source
        self._options = options

    def __getitem__(self, name: str) -> LazyTensor:
        return LazyTensor(self.header.tensors[name], self._source, self._options)

    def __iter__(self) -> Iterator[str]:
        return iter(self.header.tensors)

    def __len__(self) -> int:
        return len(self.header.tensors)

    def __repr__(self) -> str:
        count = len(self)
        return f"<Tensors {count:,} tensor{'' if count == 1 else 's'}>"


class LazyTensor:
    """One tensor of a file, not read yet: index it to read (part of) it as an array.

    Attributes:
        info: Its `TensorInfo` (name, dtype name, shape, byte range).
    """

    __slots__ = ("_options", "_source", "info")

    def __init__(self, info: TensorInfo, source: Source, options: dict[str, Any]) -> None:
        self.info = info
        self._source = source
        self._options = options

    @property
    def shape(self) -> tuple[int, ...]:
        return self.info.shape

    @property
    def ndim(self) -> int:
        return len(self.info.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype (TypeError for F4/F6, or BF16/F8 without ml_dtypes)."""
        return numpy_dtype(self.info.dtype)

    def __len__(self) -> int:
        if not self.info.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.info.shape[0]

    def __getitem__(self, key: object) -> NDArray[Any]:
        """``tensor[key]`` (numpy basic indexing), reading only its bytes; read-only."""
        dtype = self.dtype
        data = self.info.read(self._source, key, **self._options)  # checks the key first
        # The selection's shape as numpy gives it, from a view that holds no data.
        empty = np.broadcast_to(np.empty((), dtype=np.uint8), self.info.shape)
        shape = empty[key].shape  # type: ignore[call-overload]
        return np.frombuffer(data, dtype=dtype).reshape(shape)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> NDArray[Any]:
        array = self[...]
        return array if dtype is None else array.astype(dtype)

    def __repr__(self) -> str:
        return f"<LazyTensor {self.info.name!r} {self.info.dtype} {shown_shape(self.shape)}>"


def _remote(source: object) -> bool:
    """Read through read_ranges: an http(s) or fsspec URL, or a (store, path) pair."""
    return (isinstance(source, str) and is_url(source)) or in_store(source)


def _choose(header: Header, names: Iterable[str] | None) -> list[TensorInfo]:
    if names is None:
        return list(header.tensors.values())
    if isinstance(names, str):
        raise TypeError("names must be an iterable of tensor names, not a str")
    chosen = []
    for name in names:
        info = header.tensors.get(name)
        if info is None:
            raise KeyError(f"no tensor {name!r} in the file")
        chosen.append(info)
    return chosen


def _read_file(file: Any, header: Header, chosen: list[TensorInfo]) -> list[NDArray[np.uint8]]:
    """The tensors' bytes from a binary file object, after `read_header` has read the header."""
    if header.file_size is not None:
        # read_header could seek (it measured the size): the file starts at offset 0.
        spans = []
        for info in chosen:
            file.seek(info.start)
            spans.append(_exactly(file, info.nbytes, info))
        return spans
    # A stream: read_header left it just past the header; the data buffer follows, in order.
    data = _exactly(file, header.data_size, None)
    base = header.data_start
    return [data[info.start - base : info.end - base] for info in chosen]


def _exactly(file: Any, count: int, info: TensorInfo | None) -> NDArray[np.uint8]:
    data = read_at_most(file.read, count)
    if len(data) < count:
        where = "the data buffer" if info is None else f"tensor {info.name!r}"
        raise HeaderError(
            "MetadataIncompleteBuffer",
            f"the file ended {count - len(data)} bytes before the end of {where}",
            tensor=None if info is None else info.name,
        )
    return np.frombuffer(data, dtype=np.uint8)
