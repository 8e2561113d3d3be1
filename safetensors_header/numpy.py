"""Load safetensors tensors as numpy arrays: memory-mapped, validated, with BF16 and F8.

    >>> from safetensors_header.numpy import load
    >>> arrays = load("model.safetensors")  # doctest: +SKIP
    >>> arrays["lm_head.weight"].dtype  # doctest: +SKIP
    dtype(bfloat16)

Needs numpy (``pip install 'safetensors_header[numpy]'``); ``BF16`` and ``F8_*`` tensors also
need ml_dtypes (``safetensors_header[ml-dtypes]``). Importing this module imports numpy.
"""

from __future__ import annotations

import os

import numpy as np

from ._errors import HeaderError
from ._format import DTYPES, MAX_HEADER_SIZE
from ._header import Header, TensorInfo
from ._sources import Source, is_url, read_at_most, read_header

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from numpy.typing import NDArray

__all__ = ["load", "numpy_dtype"]


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
    max_header_size: int = MAX_HEADER_SIZE,
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
            without a copy. A binary file object: the tensors are read into memory. URLs
            are not read here (fetch byte ranges yourself, or use `to_kerchunk`).
        names: The tensors to load (default: all), in the order of the result.
        max_header_size: The largest header length accepted; see `parse_header`.

    Returns:
        Tensor name -> array, in the file's order (or the order of `names`).

    Raises:
        HeaderError: The file is not valid (as for `read_header`), or a file object ended
            before its data did.
        KeyError: A name in `names` is not in the file.
        TypeError: A tensor's dtype has no numpy equivalent (``F4``, ``F6_*``), or BF16/F8
            without ml_dtypes: see `numpy_dtype`.
        ValueError: `source` is an ``http(s)://`` URL.
    """
    if isinstance(source, str) and is_url(source):
        raise ValueError(
            "load() reads local files, bytes and file objects, not URLs: use read_header and "
            "TensorInfo.byte_ranges to fetch parts, or to_kerchunk with fsspec"
        )
    header = read_header(source, max_header_size=max_header_size)
    chosen = _choose(header, names)
    dtypes = [numpy_dtype(info.dtype) for info in chosen]  # refuse before reading anything
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
