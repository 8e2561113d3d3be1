"""Encoding headers: the reference's byte layout, from arguments to bytes (no files).

Layer: core (pure; `parse_header` judges every header it makes).

The layout is the reference's (``prepare`` and ``impl Serialize for Metadata`` in
``safetensors/src/tensor.rs``; docs/format.md §7): tensors ordered by dtype, largest
enum value first, then by name; data offsets packed from 0; compact JSON with
``__metadata__`` first; spaces up to a multiple of 8 bytes.

The format's rules are not re-implemented here: the arguments are checked for type and range
(so that messages speak of them), then every header is checked by `parse_header`, so that an
encoding error has the kind the reader would give the file. Two reference bugs are avoided:
``serialize({}, metadata={})`` writes ``{},"__metadata__":{}}`` and a tensor named
``__metadata__`` is written as metadata; no reader opens either file.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable, Mapping, Sequence
from operator import index
from typing import TYPE_CHECKING, Final, TypeAlias, TypeGuard

from ._core.fileformat import (
    DTYPE_BITS,
    DTYPES,
    HEADER_LENGTH_SIZE,
    MAX_HEADER_SIZE,
    METADATA_KEY,
    U64_MAX,
)
from ._core.parse import parse_header
from ._errors import HeaderError

if TYPE_CHECKING:
    from ._core.header import Header

__all__ = [
    "NUMPY_KINDS",
    "TYPE_NAMES",
    "Row",
    "buffer_error",
    "checked_metadata",
    "data_order",
    "dtype_name",
    "encode_header",
    "flat_view",
    "frame",
    "header_json",
    "laid_out",
    "tensor_specs",
    "validated",
]

_ALIGNMENT: Final = 8  # the reference pads the header with spaces to a multiple of 8
# The reference's writer refuses headers its reader would refuse (HeaderTooLarge); a name of
# its own so that tests can lower it.
_MAX_HEADER_SIZE = MAX_HEADER_SIZE
# Sort key: the reference sorts by `Dtype` descending (its derived Ord is the enum order,
# which is DTYPE_BITS' order), then by name. Rust compares names as UTF-8 bytes, which is
# code-point order, Python's str order.
_DTYPE_RANK: Final = {dtype: -rank for rank, dtype in enumerate(DTYPE_BITS)}

Row: TypeAlias = tuple[str, str, tuple[int, ...], int, int]  # name, dtype, shape, begin, end
Spec: TypeAlias = tuple[str, str, tuple[int, ...], object]  # name, dtype, shape, data


def encode_header(
    tensors: Mapping[str, tuple[str, Sequence[int]]],
    /,
    *,
    metadata: Mapping[str, str] | None = None,
) -> bytes:
    """The first ``8 + N`` bytes of the safetensors file that holds these tensors.

    Args:
        tensors: Tensor name -> ``(dtype, shape)``: ``dtype`` a key of ``DTYPE_BITS`` (e.g.
            ``"BF16"``), ``shape`` the dimensions as the header records them (element counts,
            so an ``F4`` tensor of 6 values has shape ``[6]``, 3 bytes).
        metadata: The ``__metadata__`` map, written first; ``{}`` is written as an empty map,
            ``None`` writes none. Keys are written in the mapping's order (the reference's
            order is random when there are two or more).

    Returns:
        The 8-byte little-endian length N and the N bytes of padded JSON, exactly as the
        reference (``safetensors.serialize``) lays them out. The data buffer that follows is
        the tensors' bytes in the header's order. To learn that order and every tensor's
        offsets, parse the result: ``parse_header(encoded).tensors`` is in data order, with
        ``start``/``end`` (absolute file offsets), ``nbytes`` and ``data_offsets``.

    Raises:
        HeaderError: The file could not be read back; ``kind`` is what the reader would
            report: ``InvalidHeaderDeserialization`` (unknown dtype, a dimension outside
            0..2^64-1, a tensor named ``__metadata__``), ``InvalidHeader`` (a lone surrogate,
            which UTF-8 cannot hold), ``ValidationOverflow``, ``MisalignedSlice`` (e.g.
            ``F4`` with an odd element count), ``HeaderTooLarge`` (N above 10^8).
        TypeError: An argument of the wrong Python type (names, dtypes, metadata keys and
            values must be ``str``; dimensions integers).
    """
    specs = tensor_specs(tensors, arity=2)
    rows = laid_out([(name, dtype, dims, _nbytes(dtype, dims)) for name, dtype, dims, _ in specs])
    encoded = frame(header_json(rows, checked_metadata(metadata)))
    validated(encoded, rows)
    return encoded


# --- checking the arguments ---------------------------------------------------------------


def tensor_specs(tensors: object, *, arity: int) -> list[Spec]:
    """Each tensor's name, dtype, shape and (for arity 3) data, checked for type and range."""
    if not isinstance(tensors, Mapping):
        raise TypeError(
            f"tensors must be a mapping of name to tensor, not {type(tensors).__name__}"
        )
    return [_spec(name, value, arity=arity) for name, value in tensors.items()]


def _spec(name: object, value: object, *, arity: int) -> Spec:
    """name, dtype, shape and (for arity 3) data, checked for type and range."""
    if not isinstance(name, str):
        raise TypeError(f"tensor names must be str, not {type(name).__name__}: {name!r}")
    if name == METADATA_KEY:
        # The reference writes such a tensor as if it were the metadata: no reader opens it.
        raise HeaderError(
            "InvalidHeaderDeserialization",
            "'__metadata__' cannot name a tensor: it is the header's key for the metadata",
            tensor=name,
        )
    if arity == 3 and not _is_sequence(value) and hasattr(value, "dtype"):
        return _array_spec(name, value)
    if not _is_sequence(value) or len(value) != arity:
        wanted = "(dtype, shape)" if arity == 2 else "(dtype, shape, data) or an array"
        raise TypeError(f"tensor {name!r}: expected a tuple {wanted}, not {value!r:.60}")
    dtype = value[0]
    if not isinstance(dtype, str):
        raise TypeError(f"tensor {name!r}: dtype must be a str, not {type(dtype).__name__}")
    if dtype not in _DTYPE_RANK:
        raise HeaderError(
            "InvalidHeaderDeserialization",
            f"tensor {name!r}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BITS)}",
            tensor=name,
        )
    return name, dtype, _checked_shape(name, value[1]), value[2] if arity == 3 else None


#: Each safetensors dtype's type name in numpy, ml_dtypes and torch, where they have one (they
#: agree): the reference's table (``safetensors.torch._TYPES``), with F8_E8M0, and F4 as
#: torch's float4_e2m1fn_x2 (two values a byte). The F6 types have none.
TYPE_NAMES: Final[Mapping[str, str]] = {
    "BOOL": "bool",
    "F4": "float4_e2m1fn_x2",
    "U8": "uint8",
    "I8": "int8",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "I16": "int16",
    "U16": "uint16",
    "F16": "float16",
    "BF16": "bfloat16",
    "I32": "int32",
    "U32": "uint32",
    "F32": "float32",
    "C64": "complex64",
    "F64": "float64",
    "I64": "int64",
    "U64": "uint64",
}
# fmt: off
#: numpy's type letter and item size -> the safetensors dtype (numpy not imported: the
# arrays are looked at through their dtype's attributes).
NUMPY_KINDS: Final[Mapping[tuple[object, object], str]] = {
    ("b", 1): "BOOL",
    ("i", 1): "I8",  ("u", 1): "U8",
    ("i", 2): "I16", ("u", 2): "U16", ("f", 2): "F16",
    ("i", 4): "I32", ("u", 4): "U32", ("f", 4): "F32",
    ("i", 8): "I64", ("u", 8): "U64", ("f", 8): "F64", ("c", 8): "C64",
}
# fmt: on
# ml_dtypes' type names -> the safetensors dtype (their bytes are the same): the format's
# table says which each is (`Dtype.ml_dtypes`).
_ML_DTYPES: Final[Mapping[object, str]] = {
    dtype.ml_dtypes: name for name, dtype in DTYPES.items() if dtype.ml_dtypes is not None
}


def dtype_name(dtype: object) -> str:
    """The safetensors dtype of a numpy dtype (or an ml_dtypes one): ``"F32"``, ``"BF16"``.

    Raises:
        TypeError: A dtype safetensors has no name for (strings, objects, ``complex128``,
            ``float128``...), or one of ml_dtypes' float4 and float6 types, whose values
            safetensors packs several to a byte; the message says which.
    """
    name = getattr(dtype, "name", None)
    if name in _ML_DTYPES:
        return _ML_DTYPES[name]
    if isinstance(name, str) and name.startswith(("float4_", "float6_")):
        raise TypeError(
            f"no safetensors dtype for numpy's {name!r}: safetensors packs these values "
            "several to a byte, and numpy holds one a byte: pass (dtype, shape, packed bytes)"
        )
    found = NUMPY_KINDS.get((getattr(dtype, "kind", None), getattr(dtype, "itemsize", None)))
    if found is None:
        raise TypeError(
            f"no safetensors dtype for numpy's {name or dtype!r}: its dtypes are "
            f"{', '.join(DTYPE_BITS)}"
        )
    return found


def _array_spec(name: str, array: object) -> Spec:
    """A numpy (or ml_dtypes) array as ``(name, dtype, shape, its little-endian bytes)``."""
    try:
        dtype = dtype_name(array.dtype)  # type: ignore[attr-defined]
    except TypeError as error:
        raise TypeError(f"tensor {name!r}: {error}") from None
    shape = tuple(array.shape)  # type: ignore[attr-defined]
    if array.dtype.byteorder == ">":  # type: ignore[attr-defined]
        array = array.astype(array.dtype.newbyteorder("<"))  # type: ignore[attr-defined]
    if not array.flags.c_contiguous:  # type: ignore[attr-defined]
        array = array.copy(order="C")  # type: ignore[attr-defined]
    # A flat view of its bytes: ml_dtypes' types have no buffer format of their own.
    data = array.reshape(-1).view("u1")  # type: ignore[attr-defined]
    return name, dtype, _checked_shape(name, shape), data


def _is_sequence(value: object) -> TypeGuard[Sequence[object]]:
    """A tuple, a list or another sequence, but not a string."""
    # Concrete types first: for many tensors the ABC check would cost more than all the rest.
    return isinstance(value, (tuple, list)) or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    )


def _checked_shape(name: str, shape: object) -> tuple[int, ...]:
    if isinstance(shape, (tuple, list)) and all(type(dim) is int for dim in shape):
        dims: tuple[int, ...] = tuple(shape)  # the usual case, checked at C speed
    else:
        dims = _shape_as_ints(name, shape)
    if dims and (min(dims) < 0 or max(dims) > U64_MAX):
        culprit = next(dim for dim in dims if not 0 <= dim <= U64_MAX)
        raise HeaderError(
            "InvalidHeaderDeserialization",
            f"tensor {name!r}: dimensions must be in 0..2^64-1, found {culprit}",
            tensor=name,
        )
    return dims


def _shape_as_ints(name: str, shape: object) -> tuple[int, ...]:
    """Any iterable of integers (numpy integers too, not bools or floats) as a tuple of ints."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise TypeError(f"tensor {name!r}: shape must be a sequence of integers, not {shape!r:.60}")
    dims = []
    for dim in shape:
        if isinstance(dim, bool):
            raise TypeError(f"tensor {name!r}: shape must hold integers, not {dim!r}")
        try:
            dims.append(index(dim))
        except TypeError:
            raise TypeError(
                f"tensor {name!r}: shape must hold integers, not {type(dim).__name__} {dim!r}"
            ) from None
    return tuple(dims)


def checked_metadata(metadata: object) -> dict[str, str] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(
            f"metadata must be a mapping of str to str or None, not {type(metadata).__name__}"
        )
    copy = dict(metadata)
    for key, value in copy.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                f"metadata keys and values must be str, found {key!r}: {type(value).__name__}"
            )
    return copy


def flat_view(name: str, data: object) -> memoryview:
    """A tensor's data as a flat memoryview of its bytes (no copy); the caller releases it."""
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"tensor {name!r}: data must be a bytes-like object (bytes, bytearray, memoryview, "
            f"a numpy array...), not {type(data).__name__}"
        ) from None
    with view:
        if not view.c_contiguous:
            raise TypeError(
                f"tensor {name!r}: data is not C-contiguous (row-major); pass a contiguous "
                "copy, e.g. numpy.ascontiguousarray(array)"
            )
        if view.format.startswith((">", "!")):
            raise TypeError(
                f"tensor {name!r}: data holds big-endian values ({view.format!r}), and "
                "safetensors stores little-endian ones; byte-swap it first"
            )
        # raw() is a flat byte view of any contiguous buffer, whatever its format; a
        # memoryview's cast("B") only works from native single-character formats.
        buffer = pickle.PickleBuffer(data)  # type: ignore[arg-type]
        raw = buffer.raw()
        buffer.release()
    return raw


# --- layout and encoding --------------------------------------------------------------------


def _nbytes(dtype: str, dims: tuple[int, ...]) -> int:
    """The bytes dtype x shape needs, or 0 when that is not a valid size.

    The 0 is a placeholder: `parse_header` then finds the overflow (ValidationOverflow) or
    the partial byte (MisalignedSlice) and reports it as the reader would.
    """
    count = 1
    for dim in dims:
        count *= dim
        if count > U64_MAX:
            return 0
    bits = count * DTYPE_BITS[dtype]
    return bits // 8 if bits <= U64_MAX and bits % 8 == 0 else 0


def data_order(entry: tuple[str, str, object, object]) -> tuple[int, str]:
    """Sort key of ``(name, dtype, ...)`` rows: the reference's order of the data."""
    return _DTYPE_RANK[entry[1]], entry[0]


def laid_out(entries: list[tuple[str, str, tuple[int, ...], int]]) -> list[Row]:
    """The reference's order, with data offsets packed from 0."""
    rows = []
    offset = 0
    for name, dtype, dims, size in sorted(entries, key=data_order):
        rows.append((name, dtype, dims, offset, offset + size))
        offset += size
    if offset > U64_MAX:
        raise HeaderError(
            "ValidationOverflow",
            f"the tensors need {offset:,} bytes in all, more than 2^64-1",
        )
    return rows


def header_json(rows: Sequence[Row], metadata: dict[str, str] | None) -> bytes:
    """The header's JSON as the reference writes it, unpadded.

    json.dumps compact, ensure_ascii=False, escapes strings exactly as serde_json does:
    ``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``, other controls as ``\\u00XX`` (lowercase),
    everything else (DEL, U+2028, non-ASCII) as itself.
    """
    # `__metadata__` first when present, even empty: the reference's bug is writing `{}`
    # before it when there are no tensors.
    document: dict[str, object] = {} if metadata is None else {METADATA_KEY: metadata}
    for name, dtype, dims, begin, end in rows:
        document[name] = {"dtype": dtype, "shape": dims, "data_offsets": (begin, end)}
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), check_circular=False)
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise _surrogate_error(rows, metadata) from None


def _surrogate_error(rows: Sequence[Row], metadata: dict[str, str] | None) -> HeaderError:
    """Name the string that UTF-8 could not encode (only lone surrogates fail)."""
    strings: list[tuple[str | None, str]] = [(name, name) for name, *_ in rows]
    strings += [(None, string) for item in (metadata or {}).items() for string in item]
    tensor, culprit = next(item for item in strings if not _encodable(item[1]))
    return HeaderError(
        "InvalidHeader",
        f"the string {culprit[:40]!r} holds a lone surrogate, which UTF-8 (and so a "
        "safetensors header) cannot hold",
        tensor=tensor,
    )


def _encodable(text: str) -> bool:
    """Whether UTF-8 can hold the string (a lone surrogate is all it cannot)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def frame(body: bytes, size: int | None = None) -> bytes:
    """The length prefix, the JSON and its padding: to ``size``, or to a multiple of 8."""
    if size is None:
        size = len(body) + -len(body) % _ALIGNMENT
    if size > _MAX_HEADER_SIZE:
        raise HeaderError(
            "HeaderTooLarge",
            f"the header would be {size:,} bytes, above the limit of {_MAX_HEADER_SIZE:,} "
            "that the reference reads",
        )
    return size.to_bytes(HEADER_LENGTH_SIZE, "little") + body + b" " * (size - len(body))


def validated(encoded: bytes, rows: Sequence[Row]) -> Header:
    """The reader's verdict on the file these bytes would start."""
    data_size = rows[-1][4] if rows else 0
    return parse_header(encoded, file_size=len(encoded) + data_size)


def buffer_error(
    error: HeaderError, entries: Sequence[tuple[str, str, tuple[int, ...], memoryview]]
) -> HeaderError:
    """Restate the reader's size error in terms of the data given, not data_offsets."""
    if error.kind != "TensorInvalidInfo":
        return error
    name, dtype, dims, view = next(entry for entry in entries if entry[0] == error.tensor)
    return HeaderError(
        error.kind,
        f"tensor {name!r}: dtype {dtype} and shape [{', '.join(map(str, dims))}] need "
        f"{_nbytes(dtype, dims):,} bytes, but its data has {view.nbytes:,} bytes",
        tensor=name,
    )
