"""The rule set: the exact reader of the JSON, and the walk over the layout.

Layer: core (sans-IO).

The reference's reading of a header, rule by rule, in its order: serde_json's and serde's
reading of the text (docs/format.md §3-§4: `exact_columns`), ``Metadata::validate``'s walk
over the tensors sorted by offset (§5: `validate_layout`), then the file's size (§5.9:
`build`). Every rule has one function here, which docs/format.md names, and every message is
written here. The nesting depth is measured without recursion first (§3.11:
`reject_deep_nesting`), so that json's recursive scanner never meets more than 127 levels;
a caller deep in its own stack gets the verdict from a fresh thread (`in_fresh_thread`).
"""

from __future__ import annotations

import json
import re
from functools import cache
from itertools import accumulate
from operator import le
from types import MappingProxyType

from .columns import CANONICAL_DTYPE, Columns, chained, element_counts, sizes_hold, sort_by_offsets
from .errors import HeaderError
from .fileformat import DTYPE_BITS, HEADER_LENGTH_SIZE, METADATA_KEY, TENSOR_FIELDS, U64_MAX
from .header import TensorTable, make_header, shown_shape

__all__ = ["MAX_DEPTH", "JsonObject", "build", "decode_pairs", "exact_columns", "fail"]
__all__ += ["in_fresh_thread", "nested_deeper_than", "reject_deep_nesting"]
__all__ += ["validate_layout"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any, Final, NoReturn, TypeVar

    from .columns import Entry, Shape
    from .header import Header

    _T = TypeVar("_T")

_I64_MIN: Final = -(2**63)  # serde_json: integers below this are floats (§3.7)


MAX_DEPTH: Final = 127  # serde_json's recursion limit of 128 leaves 127 nested containers


# --- the JSON: serde_json's and serde's reading (§3, §4) --------------------------------------


def exact_columns(text: str) -> Columns:
    """serde_json's and serde's reading of the header, rule by rule (§3, §4).

    The lexical rules json's own scanner shares with serde_json (§3.2-§3.4, §3.8, §3.9, and
    keys compared after unescaping, §4.13) are its, in strict mode; the others are the
    hooks below.
    """
    try:
        top = _DECODER.decode(text)
    except _Reject as error:
        _bad_json(str(error))
    except json.JSONDecodeError as error:
        offset = HEADER_LENGTH_SIZE + len(text[: error.pos].encode())
        _bad_json(
            f"{error.msg} at line {error.lineno} column {error.colno} (file offset {offset:,})",
            offset=offset,
        )
    if "\\u" in text:  # only an escape can make a surrogate
        _reject_lone_surrogates(top)
    metadata, tensors = _read_top_level(top)
    names = list(tensors)
    if not names:
        return Columns([], [], [], [], [], metadata)
    dtypes, shapes, begins, ends = map(list, zip(*tensors.values(), strict=True))
    return Columns(names, dtypes, _interned(shapes)[0], begins, ends, metadata)


def _read_top_level(top: object) -> tuple[dict[str, str] | None, dict[str, Entry]]:
    """§4.1-§4.2, §4.4, §4.11: an object; `__metadata__` once; a repeated name, the last."""
    if type(top) is not JsonObject:
        _bad_json(f"expected a JSON object at the top level, found {_describe_value(top)}")
    metadata: dict[str, str] | None = None
    seen_metadata = False
    tensors: dict[str, Entry] = {}
    for key, value in top:
        if key == METADATA_KEY:
            if seen_metadata:
                _bad_json('duplicate key "__metadata__"')
            seen_metadata = True
            metadata = _read_metadata(value)
        else:
            # A repeated tensor name: the last one wins, but every copy must be well-formed.
            tensors[key] = _read_tensor_entry(key, value)
    return metadata, tensors


def _reject_lone_surrogates(top: object) -> None:
    """§3.10: no lone surrogate in any string, keys included; json.loads lets them through."""
    stack = [top]
    while stack:
        node = stack.pop()
        if type(node) is JsonObject:
            for key, value in node:
                _check_string(key)
                stack.append(value)
        elif type(node) is list:
            stack.extend(node)
        elif type(node) is str:
            _check_string(node)


def _check_string(value: str) -> None:
    if _surrogate().search(value):
        _bad_json(f"lone surrogate escape in the string {value[:40]!r}")


def _read_metadata(value: object) -> dict[str, str] | None:
    """§4.3: null, or an object of strings (a repeated key: the last value)."""
    if value is None:
        return None
    if type(value) is not JsonObject:
        _bad_json(f'"__metadata__" must be an object or null, found {_describe_value(value)}')
    for key, item in value:
        if type(item) is not str:
            _bad_json(f'"__metadata__" values must be strings; {key!r} is {_describe_value(item)}')
    return dict(value)


def _read_tensor_entry(name: str, value: object) -> Entry:
    """§4.5-§4.7, §4.12: an object of the three fields (once each), or an array of three."""
    if type(value) is JsonObject:
        fields: dict[str, object] = {}
        for key, item in value:
            if key in TENSOR_FIELDS:
                if key in fields:
                    _bad_json(f"tensor {name!r}: duplicate field {key!r}", tensor=name)
                fields[key] = item
            # Unknown fields are ignored, as serde does.
        for key in TENSOR_FIELDS:
            if key not in fields:
                _bad_json(f"tensor {name!r}: missing field {key!r}", tensor=name)
        dtype, shape, offsets = (fields[key] for key in TENSOR_FIELDS)
    elif type(value) is list:
        if len(value) != 3:
            _bad_json(
                f"tensor {name!r}: the array form must be [dtype, shape, data_offsets], "
                f"found {len(value)} elements",
                tensor=name,
            )
        dtype, shape, offsets = value
    else:
        _bad_json(
            f"tensor {name!r}: expected an object with dtype, shape and data_offsets, "
            f"found {_describe_value(value)}",
            tensor=name,
        )
    dims = _read_u64_array(name, "shape", shape)
    span = _read_u64_array(name, "data_offsets", offsets)
    if len(span) != 2:
        _bad_json(
            f"tensor {name!r}: data_offsets must be [begin, end], found {len(span)} numbers",
            tensor=name,
        )
    return _read_dtype(name, dtype), dims, span[0], span[1]


def _read_dtype(name: str, value: object) -> str:
    """§2.2, §4.8: one of the 22 names, or the map form ``{"F32": null}``."""
    if type(value) is JsonObject and len(value) == 1 and value[0][1] is None:
        value = value[0][0]  # serde's map form of a unit variant: {"F32": null}
    if type(value) is not str:
        _bad_json(
            f"tensor {name!r}: dtype must be a string, found {_describe_value(value)}", tensor=name
        )
    if value not in CANONICAL_DTYPE:
        _bad_json(
            f"tensor {name!r}: unknown dtype {value!r}; expected one of {', '.join(DTYPE_BITS)}",
            tensor=name,
        )
    return CANONICAL_DTYPE[value]


def _read_u64_array(name: str, field: str, value: object) -> list[int]:
    """§3.7, §4.9-§4.10: an array of integers in 0..2^64-1."""
    if type(value) is not list:
        _bad_json(
            f"tensor {name!r}: {field} must be an array of integers, "
            f"found {_describe_value(value)}",
            tensor=name,
        )
    for item in value:
        if type(item) is not int or not 0 <= item <= U64_MAX:
            _bad_json(
                f"tensor {name!r}: {field} must hold integers in 0..2^64-1, "
                f"found {_describe_value(item)}",
                tensor=name,
            )
    return value


def _describe_value(value: object) -> str:
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is int:
        return f"the integer {value}"
    if type(value) is float:
        if value == 0 and str(value) == "-0.0":
            return "-0 (a float to serde_json)"
        return f"the non-integer number {value!r}"
    if type(value) is str:
        shown = value if len(value) <= 40 else value[:40] + "..."
        return f"the string {shown!r}"
    if type(value) is JsonObject:
        return f"an object with {len(value)} keys"
    return f"an array of {len(value)}"  # type: ignore[arg-type]


def _bad_json(message: str, *, tensor: str | None = None, offset: int | None = None) -> NoReturn:
    fail("InvalidHeaderDeserialization", message, tensor=tensor, offset=offset)


def _interned(shapes: Iterable[Iterable[int]]) -> tuple[list[Shape], dict[Shape, Shape]]:
    """Shapes as tuples, one object per distinct shape (a checkpoint has few); the distinct."""
    tuples = list(map(tuple, shapes))
    distinct: dict[Shape, Shape] = {}
    return list(map(distinct.setdefault, tuples, tuples)), distinct


class _Reject(Exception):
    """A lexical rule of serde_json, raised from inside json's scanner hooks."""


class JsonObject(list["tuple[str, Any]"]):
    """A JSON object as all of its key/value pairs, in order, duplicates kept."""


def decode_pairs(text: str, start: int = 0) -> tuple[Any, int]:
    """The JSON value at `start` of a text that `parse_header` accepted, and where it ends.

    Objects are `JsonObject` lists of their (key, value) pairs, duplicates kept: what the
    strict audit needs to see. (Only for valid headers: the lexical rules of serde_json are
    applied, but no error is translated into a verdict.)
    """
    value, end = _DECODER.raw_decode(text, start)
    return value, end


def _parse_int(token: str) -> int | float:
    """§3.7: a JSON integer as serde_json reads it (an int, or a float beyond i64/u64)."""
    # serde_json: "-0" is a float; integers outside i64/u64 are floats, or out of range.
    if token == "-0":
        return -0.0
    # Past 20 digits the value is outside i64/u64 (and int() could meet Python's digit limit).
    if len(token) <= 20 and _I64_MIN <= (value := int(token)) <= U64_MAX:
        return value
    return _parse_float(token)


def _parse_float(token: str) -> float:
    if _f64_out_of_range(token):
        shown = token if len(token) <= 40 else f"{token[:20]}... ({len(token):,} characters)"
        raise _Reject(f"the number {shown} is out of range")
    return float(token)


@cache
def _number_pattern() -> re.Pattern[str]:
    """A JSON number's parts (compiled on first use, as every pattern here: a cheap import)."""
    return re.compile(r"-?([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?")


_I32_MAX: Final = 2**31 - 1


_INFINITY: Final = float("inf")


_POW10: Final = tuple(float(f"1e{exponent}") for exponent in range(309))  # serde_json's POW10


def _f64_out_of_range(token: str) -> bool:
    """Whether serde_json rejects a JSON number as out of range (serde_json's de.rs).

    Without the ``float_roundtrip`` feature (the reference does not enable it), serde_json
    does not round correctly near f64::MAX: it keeps the leading digits that fit in a u64,
    counts every digit it drops as a power of ten, and multiplies once by a power of ten.
    So it rejects some numbers that round to f64::MAX, such as 1.7976931348623158e308.
    Underflow is never an error.
    """
    match = _number_pattern().fullmatch(token)
    assert match is not None  # json's scanner only hands over valid number tokens
    whole, fraction, exponent_sign, exponent_digits = match.groups()
    # Integer digits: kept while the u64 holds them, then each dropped one adds a power of 10.
    # (Any 19 digits fit; 20 fit up to u64::MAX.)
    kept = min(len(whole), 20 if int(whole[:20]) <= U64_MAX else 19)
    significand = int(whole[:kept])
    exponent = len(whole) - kept
    if fraction:
        if significand == 0:  # leading zeros of the fraction only move the exponent
            digits = fraction.lstrip("0")
            exponent -= len(fraction) - len(digits)
        else:
            digits = fraction
        for digit in map(int, digits):  # at most ~20 rounds: then the u64 is full
            if significand > U64_MAX // 10 or (
                significand == U64_MAX // 10 and digit > U64_MAX % 10
            ):
                break  # serde_json ignores the remaining digits
            significand = significand * 10 + digit
            exponent -= 1
    if exponent_digits is not None:
        stripped = exponent_digits.lstrip("0")
        if len(stripped) > 10 or int(stripped or "0") > _I32_MAX:
            return significand != 0 and exponent_sign != "-"
        value = int(stripped or "0")
        exponent += -value if exponent_sign == "-" else value
        exponent = max(-_I32_MAX - 1, min(_I32_MAX, exponent))  # i32 saturating arithmetic
    if exponent < 0:
        return False  # divisions never overflow
    if exponent < len(_POW10):
        return abs(float(significand) * _POW10[exponent]) == _INFINITY
    return significand != 0


def _parse_constant(token: str) -> NoReturn:
    """§3.5: NaN and Infinity are not JSON numbers."""
    raise _Reject(f"{token} is not valid JSON")


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=JsonObject,
    parse_float=_parse_float,
    parse_int=_parse_int,
    parse_constant=_parse_constant,
)


@cache
def _surrogate() -> re.Pattern[str]:
    return re.compile("[\ud800-\udfff]")


# --- the nesting, measured without recursion (§3.11) ------------------------------------------


@cache
def _string() -> re.Pattern[str]:
    # The closing quote optional: a string never closed runs to the end of the text in one
    # match (required, each of its escaped quotes would start a scan to the end: quadratic).
    return re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?')


_NOT_BRACKETS: Final = bytes(set(range(256)) - set(b"[]{}"))  # UTF-8 keeps brackets one byte


_DEPTH_STEP: Final = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def reject_deep_nesting(text: str) -> None:
    """§3.11: serde_json's nesting limit, found by counting brackets outside strings.

    For a valid document this is its depth; for an invalid one any verdict here is the one
    the JSON readers would give (InvalidHeaderDeserialization).
    """
    if nested_deeper_than(text, MAX_DEPTH):
        _bad_json(f"nesting deeper than {MAX_DEPTH} arrays and objects")


def nested_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON `text` nests more than `limit` arrays and objects, measured without
    recursion (json's reader recurses as deep as the document: RecursionError)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # no deeper than the brackets it opens
    # With no escaped quote, quotes delimit strings.
    outside = _string().sub("", text) if '\\"' in text else "".join(text.split('"')[0::2])
    brackets = outside.encode().translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > limit


def in_fresh_thread(function: Callable[[str], _T], argument: str) -> _T:
    import threading  # only here: the rare caller already deep in its stack

    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, function(argument)))
        except BaseException as error:  # re-raised in the caller's thread
            outcome.append((False, error))

    thread = threading.Thread(target=run, name="safetensors_header-parse")
    thread.start()
    thread.join()
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value  # type: ignore[no-any-return]


# --- the layout: the reference's Metadata::validate, then the file's size (§5) ----------------


def validate_layout(columns: Columns) -> Columns:
    """The reference's Metadata::validate on type-checked columns: sort, then walk."""
    names, _, shapes, begins, ends, _ = columns
    if not names:
        return columns
    linked = chained(begins, ends)
    if not (linked and all(map(le, begins, ends))):
        columns = sort_by_offsets(columns)  # the usual file is in order already
        linked = chained(columns.begins, columns.ends)
    if not (linked and sizes_hold(columns, element_counts(dict.fromkeys(shapes)))):
        _walk(*columns[:5])
    return columns


def _walk(
    names: list[str],
    dtypes: list[str],
    shapes: list[Shape],
    begins: list[int],
    ends: list[int],
) -> None:
    """The reference's walk over the tensors sorted by offsets (§5.4): per tensor, its
    offsets, element count, size in bits, whole bytes and span, in that order; the first
    fault wins."""
    cursor = 0
    for name, dtype, shape, begin, end in zip(names, dtypes, shapes, begins, ends, strict=True):
        _check_offsets(name, begin, end, cursor)
        cursor = end
        count = _check_element_count(name, shape)
        bits = _check_size_in_bits(name, dtype, shape, count)
        _check_whole_bytes(name, dtype, shape, bits)
        _check_span(name, dtype, shape, bits // 8, begin, end)


def _running_products(shape: Iterable[int]) -> Iterator[int]:
    count = 1
    for dim in shape:
        count *= dim
        yield count


def _check_offsets(name: str, begin: int, end: int, cursor: int) -> None:
    """§5.2-§5.3: a tensor begins where the previous one ends (a zero-length one too)."""
    if begin == cursor and end >= begin:
        return
    if end < begin:
        found = f"its end {end:,} is before its begin {begin:,}"
    elif begin > cursor:
        found = f"a gap of {begin - cursor:,} bytes before it"
    else:
        found = f"it overlaps the previous tensor by {cursor - begin:,} bytes"
    fail(
        "InvalidOffset",
        f"tensor {name!r}: data_offsets [{begin}, {end}] should begin at {cursor:,}, "
        f"where the previous tensor ends; found {found}",
        tensor=name,
    )


def _check_element_count(name: str, shape: Shape) -> int:
    """§5.5: the shape multiplied left to right in 64 bits; the count."""
    count = 1
    for count in _running_products(shape):
        if count > U64_MAX:
            fail(
                "ValidationOverflow",
                f"tensor {name!r}: the element count of shape {shown_shape(shape)} "
                "overflows 64 bits",
                tensor=name,
            )
    return count


def _check_size_in_bits(name: str, dtype: str, shape: Shape, count: int) -> int:
    """§5.6: the element count times the dtype's bits, in 64 bits; the size in bits."""
    bits = count * DTYPE_BITS[dtype]
    if bits > U64_MAX:
        shown = f"{dtype} x {shown_shape(shape)}"
        message = f"tensor {name!r}: the size in bits of {shown} overflows 64 bits"
        fail("ValidationOverflow", message, tensor=name)
    return bits


def _check_whole_bytes(name: str, dtype: str, shape: Shape, bits: int) -> None:
    """§5.7: a size in bits that is not whole bytes (only sub-byte dtypes) is misaligned."""
    if bits % 8:
        fail(
            "MisalignedSlice",
            f"tensor {name!r}: {dtype} x {shown_shape(shape)} is {bits:,} bits, "
            "not a whole number of bytes",
            tensor=name,
        )


def _check_span(  # noqa: PLR0917 - the tensor's facts
    name: str, dtype: str, shape: Shape, size: int, begin: int, end: int
) -> None:
    """§2.3, §5.8: the span of data_offsets is the tensor's size in bytes."""
    if end - begin != size:
        fail(
            "TensorInvalidInfo",
            f"tensor {name!r}: dtype {dtype} and shape {shown_shape(shape)} need "
            f"{size:,} bytes, but data_offsets [{begin}, {end}] span {end - begin:,} bytes",
            tensor=name,
        )


def build(columns: Columns, header_size: int, file_size: int | None) -> Header:
    """The Header, once the file size is checked (the columns are valid, in offset order)."""
    names, dtypes, shapes, begins, ends, metadata = columns
    data_start = HEADER_LENGTH_SIZE + header_size
    data_end = ends[-1] if ends else 0
    if file_size is not None and data_start + data_end != file_size:
        _coverage_fault(data_start + data_end, file_size)
    return make_header(
        TensorTable(names, dtypes, shapes, begins, ends, data_start),
        None if metadata is None else MappingProxyType(metadata),
        header_size,
        data_end,
        file_size,
    )


def _coverage_fault(covered: int, file_size: int) -> NoReturn:
    """§5.9: the tensors must cover the data buffer exactly, to the end of the file; they
    cover it up to file offset `covered` instead."""
    if covered < file_size:
        found = f"{file_size - covered:,} bytes after the last tensor"
    else:
        found = f"it ends {covered - file_size:,} bytes short"
    fail(
        "MetadataIncompleteBuffer",
        f"the tensors cover the data buffer up to file offset {covered:,}, "
        f"but the file is {file_size:,} bytes: {found}",
        # The message has the shortfall; the hint only what to do about it.
        hint="an interrupted download or copy? Fetch it again" if covered > file_size else None,
    )


def fail(kind: str, message: str, **context: Any) -> NoReturn:
    """Raise the verdict (`context`: HeaderError's tensor, offset, needed, hint)."""
    raise HeaderError(kind, message, **context)
