"""The sans-IO core: bytes in, a validated `Header` out.

Every rule is the reference's (the Rust core of the ``safetensors`` package, ``read_metadata``
and ``Metadata::validate`` in ``safetensors/src/tensor.rs``), applied in its order, so that the
verdict and the error kind on any input are the reference's. (One exception: with two
non-empty tensors on one byte range the reference's own kind varies from run to run with
its hash-map order; ours is always one of the kinds it gives.) The rules, case by case, are
in the project's format-rules.md.

Two JSON paths give the same result:

* the fast path runs ``json.loads``' C decoder (set to stop at any float, NaN or Infinity)
  and then checks, with C-level passes over whole columns (``map``, ``set``, list
  comparison, counting characters), that nothing ``json.loads`` is more lenient about than
  serde_json could have happened: no duplicate keys were dropped, no lone surrogate, no
  ``-0``, no nesting, no bool where an integer must be. It gives up (returns ``None``)
  whenever it cannot be sure;
* the exact path keeps every key/value pair and number token and applies serde_json's and
  serde's rules one by one. It decides every file the fast path gives up on, and writes the
  error messages.

No I/O happens here; `_sources.py` feeds this module bytes.
"""

from __future__ import annotations

import gc
import json
import math
import re
import sys
import threading
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import accumulate, chain, repeat
from operator import index, itemgetter, le, mul, sub
from types import MappingProxyType
from typing import Any, Final, NoReturn

from ._diagnose import SNIFF_SIZE, sniff, truncation_hint
from ._dtypes import DTYPE_BITS
from ._errors import HeaderError
from ._header import HEADER_LENGTH_SIZE, Header, TensorInfo

__all__ = ["MAX_HEADER_SIZE", "parse_header"]

MAX_HEADER_SIZE: Final = 100_000_000  # the reference's MAX_HEADER_SIZE (10^8 bytes, inclusive)

_U64_MAX: Final = 2**64 - 1  # offsets, dims and sizes are u64 (usize) in the reference
_I64_MIN: Final = -(2**63)  # serde_json: integers below this are floats
_MAX_DEPTH: Final = 127  # serde_json's recursion limit of 128 leaves 127 nested containers
_TENSOR_FIELDS: Final = ("dtype", "shape", "data_offsets")
_METADATA_KEY: Final = "__metadata__"

_CANONICAL_DTYPE: Final = {name: name for name in DTYPE_BITS}  # to keep one object per dtype
_bits_of = DTYPE_BITS.__getitem__
_SUB_BYTE_DTYPES: Final = frozenset(name for name, bits in DTYPE_BITS.items() if bits % 8)
_bytes_of = {name: bits // 8 for name, bits in DTYPE_BITS.items()}.__getitem__

# \u escapes json.loads would read differently from serde_json, or that would defeat the
# fast path's counting: of printable ASCII (could spell a key such as "dtype", or a ':' or
# '-' it counts) and of surrogates (Python accepts lone ones).
_RISKY_ESCAPE: Final = re.compile(r"\\u(?:00[2-7]|[dD][89a-fA-F])")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")

# Columns: names, dtypes, shapes, begins, ends, metadata; one row per tensor after "last wins".
_Shape = tuple[int, ...]
_Columns = tuple[list[str], list[str], list[_Shape], list[int], list[int], dict[str, str] | None]
_Entry = tuple[str, list[int], int, int]  # dtype, shape, begin, end

_new = object.__new__
# TensorInfo's slot setters: the parser fills instances column by column at C speed; the
# dataclass __init__ (one Python call per tensor) is for users and costs twice as much.
_TENSOR_SLOTS: Final = tuple(
    TensorInfo.__dict__[field].__set__
    for field in ("name", "dtype", "shape", "start", "end", "data_start")
)


def parse_header(
    prefix: bytes | bytearray | memoryview,
    /,
    *,
    file_size: int | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
) -> Header:
    """Parse and validate a safetensors header from bytes that start at file offset 0.

    Args:
        prefix: Any bytes-like object (``bytes``, ``bytearray``, ``memoryview``, ``mmap``)
            holding at least the first ``8 + N`` bytes of the file: the whole file, a partial
            download, a memory map. Bytes past the header are not read.
        file_size: The size of the whole file. When given, the rule that the tensors cover the
            data buffer exactly is checked (``MetadataIncompleteBuffer``); when ``None`` it is
            skipped, ``Header.file_size`` is ``None``, and ``prefix`` is judged as if it were
            the whole file for the length checks.
        max_header_size: The largest N accepted (``HeaderTooLarge`` above it). The default is
            the reference's limit; raise it for huge headers, lower it for untrusted input.

    Returns:
        The validated `Header`.

    Raises:
        HeaderError: The bytes are not a valid safetensors header; ``kind`` names the
            reference's error for the same bytes. When ``prefix`` ends before the header does,
            ``needed`` says how many bytes to pass instead (kind ``PrefixTooShort`` if
            ``file_size`` shows the file is long enough). Any other exception is a bug.
    """
    if file_size is not None:
        file_size = index(file_size)
        if file_size < 0:
            raise ValueError(f"file_size must be 0 or more, not {file_size}")
    with memoryview(prefix) as raw:
        try:
            view = raw.cast("B")
        except TypeError:
            raise TypeError("parse_header() needs a C-contiguous bytes-like object") from None
        with view:
            header_size, text = _split(view, file_size, max_header_size)
    if _C_STACK_AT_RISK and sys.getrecursionlimit() > _SAFE_RECURSION_LIMIT:
        _check_depth(text)
    with _gc_paused():
        columns = _fast_columns(text)
        if columns is None:
            columns = _layout(_exact_columns(text))
        return _build(columns, header_size, file_size)


# Before Python 3.12, json's C scanner recurses as deep as sys.getrecursionlimit() allows, so a
# caller who raised the limit far enough lets deep nesting overflow the C stack (a crash, not
# a RecursionError). Then the depth is measured first, without recursion.
_C_STACK_AT_RISK: Final = sys.version_info < (3, 12)
_SAFE_RECURSION_LIMIT: Final = 10_000
_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET: Final = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP: Final = {"[": 1, "{": 1, "]": -1, "}": -1}


def _check_depth(text: str) -> None:
    """serde_json's nesting limit, found by counting brackets outside strings."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > _MAX_DEPTH:
        _bad_json(f"nesting deeper than {_MAX_DEPTH} arrays and objects")


def _split(view: memoryview, file_size: int | None, limit: int) -> tuple[int, str]:
    """Checks 1-4 of the reference: the length prefix, its limit, the file size, UTF-8."""
    have = len(view)
    size = have if file_size is None else file_size
    if size < HEADER_LENGTH_SIZE:
        _fail(
            "HeaderTooSmall",
            f"expected at least 8 bytes (the header length), found a file of {size} bytes",
            needed=HEADER_LENGTH_SIZE if file_size is None else None,
            hint=sniff(bytes(view[:SNIFF_SIZE])) if size == have else None,
        )
    if have < HEADER_LENGTH_SIZE:
        _fail(
            "PrefixTooShort",
            f"need the first 8 bytes of the file to read the header length, got {have}",
            needed=HEADER_LENGTH_SIZE,
        )
    header_size = int.from_bytes(view[:HEADER_LENGTH_SIZE], "little")
    if header_size > limit:
        _fail(
            "HeaderTooLarge",
            f"the header length is {header_size:,} bytes, above the limit of {limit:,} "
            f"(max_header_size); the file starts with {bytes(view[:HEADER_LENGTH_SIZE])!r}",
            hint=sniff(bytes(view[:SNIFF_SIZE])),
        )
    stop = HEADER_LENGTH_SIZE + header_size
    if stop > size:
        _fail(
            "InvalidHeaderLength",
            f"the header length is {header_size:,} bytes, so the header ends at byte "
            f"{stop:,}, but the file is {size:,} bytes",
            needed=stop if file_size is None else None,
            hint=sniff(bytes(view[:SNIFF_SIZE])) or truncation_hint(stop - size),
        )
    if stop > have:
        _fail(
            "PrefixTooShort",
            f"the header ends at byte {stop:,} but only {have:,} bytes were given",
            needed=stop,
        )
    try:
        text = str(view[HEADER_LENGTH_SIZE:stop], "utf-8")
    except UnicodeDecodeError as error:
        _fail(
            "InvalidHeader",
            f"the header is not valid UTF-8: {error.reason} at byte {error.start:,} of the "
            f"header (file offset {HEADER_LENGTH_SIZE + error.start:,})",
            offset=HEADER_LENGTH_SIZE + error.start,
            hint=sniff(bytes(view[:SNIFF_SIZE])),
        )
    return header_size, text


# --- the fast path ------------------------------------------------------------------------


def _fast_columns(text: str) -> _Columns | None:
    """Read a header with json's C decoder when that is provably what serde_json reads.

    Returns the columns in offset order, every rule but the file-size one checked, or
    ``None`` (the exact path decides) on any doubt: a JSON error, a form or type the fast
    checks do not cover, a layout fault, or a sign that json.loads merged or normalised
    something serde_json would not have.
    """
    # memchr-speed screens first; the regex only runs when a backslash is there at all.
    if "\\" in text and _RISKY_ESCAPE.search(text):
        return None
    try:
        top = _FAST_DECODER.decode(text)  # stops at any float, NaN or Infinity
    except (ValueError, RecursionError):
        return None
    if type(top) is not dict:
        return None
    metadata: dict[str, str] | None = None
    kept_keys = len(top)
    kept_strings = ["".join(top)]
    if _METADATA_KEY in top:
        value = top.pop(_METADATA_KEY)
        if value is not None:
            if type(value) is not dict or not _all_of_type(value.values(), str):
                return None
            metadata = value
            kept_keys += len(value)
            kept_strings += (*value, *value.values())
    names = list(top)
    entries = list(top.values())
    kept_keys += 3 * len(entries)
    # Each key in the text has exactly one ':' after it; every other ':' is inside a string.
    # If the text holds exactly as many ':' as the keys and strings we kept, json.loads'
    # "last wins" dropped nothing: no duplicate key anywhere, at any level. Likewise a '-'
    # outside the kept strings is a negative number somewhere (or "-0", which json.loads
    # reads as the integer 0 and serde_json as a float), and an 'e' beyond the one in each
    # of the three field names per entry and the hex digits of \u escapes is a true or a
    # false (the decoder already stopped at any float). Dtype names are upper case: the
    # strings not kept hold no ':', '-' or 'e'.
    kept = "".join(kept_strings)
    if text.count(":") != kept_keys + kept.count(":"):
        return None
    if "-" in text and text.count("-") != kept.count("-"):
        return None
    if not _e_accounted_for(text, 3 * len(entries) + kept.count("e")):
        return None
    if not entries:
        return [], [], [], [], [], metadata
    try:
        # Only objects of exactly dtype, shape and data_offsets get through: a list entry
        # (array form) raises TypeError, a missing field KeyError, a map-form dtype
        # TypeError (unhashable), an unknown dtype KeyError, offsets that are not a pair a
        # length mismatch, a shape holding an array TypeError (unhashable). No entry has a
        # fourth key: the ':' count allowed three keys per entry.
        dtypes = list(map(_CANONICAL_DTYPE.__getitem__, map(_get_dtype, entries)))
        shapes = list(map(_get_shape, entries))
        offsets = list(map(_get_offsets, entries))
        if not _all_of_type(shapes, list) or set(map(len, offsets)) != {2}:
            return None
        begins = list(map(_first, offsets))
        ends = list(map(_second, offsets))
        shapes, distinct = _interned(shapes)
    except (TypeError, KeyError):
        return None
    # JSON integers only: the text holds no float and no bool (above), so equal shapes are
    # equal integers and the distinct ones tell the types of all. No negative number is in
    # the text; offsets too large are caught by the layout check (last end bounded).
    if not (
        _all_of_type(chain.from_iterable(distinct), int)
        and _all_of_type(begins, int)
        and _all_of_type(ends, int)
    ):
        return None
    columns: _Columns = (names, dtypes, shapes, begins, ends, metadata)
    if not _chained(begins, ends):
        columns = _sorted(columns)
        if not _chained(columns[3], columns[4]):
            return None
    # Chained with every size matching means every end >= begin: the rows are in the
    # reference's order, and its walk would pass them.
    return columns if _sizes_hold(columns, distinct) else None


def _e_accounted_for(text: str, expected: int) -> bool:
    """Whether the text's 'e's are the `expected` ones in strings plus \\u escapes' hex digits.

    The hex digits are counted only when there are more 'e's than expected (a regex pass):
    Python's json.dumps writes "é" as \\u00e9.
    """
    found = text.count("e")
    return found == expected or (
        "\\" in text and found == expected + "".join(_U_ESCAPE.findall(text)).count("e")
    )


# Escapes are matched left to right, so that an escaped backslash before "u00e9" (\\u00e9 in
# the text) does not start one; JSON has no backslash outside strings.
_U_ESCAPE: Final = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)")


def _no_float(token: str) -> NoReturn:
    raise ValueError(f"{token} is not an integer")


# The fast path reads integers only: any float, NaN or Infinity hands the text to the exact path.
_FAST_DECODER: Final = json.JSONDecoder(parse_float=_no_float, parse_constant=_no_float)
_get_dtype = itemgetter("dtype")
_get_shape = itemgetter("shape")
_get_offsets = itemgetter("data_offsets")
_first = itemgetter(0)
_second = itemgetter(1)


def _interned(shapes: Iterable[Iterable[int]]) -> tuple[list[_Shape], dict[_Shape, _Shape]]:
    """Shapes as tuples, one object per distinct shape (a checkpoint has few); the distinct."""
    tuples = list(map(tuple, shapes))
    distinct: dict[_Shape, _Shape] = {}
    return list(map(distinct.setdefault, tuples, tuples)), distinct


def _all_of_type(values: Iterable[object], kind: type) -> bool:
    return set(map(type, values)) <= {kind}


# --- the exact path -----------------------------------------------------------------------


class _Reject(Exception):
    """A lexical rule of serde_json, raised from inside json's scanner hooks."""


class _Object(list[tuple[str, Any]]):
    """A JSON object as all of its key/value pairs, in order, duplicates kept."""


def _parse_int(token: str) -> int | float:
    # serde_json: "-0" is a float; integers outside i64/u64 are floats, or out of range.
    if token == "-0":
        return -0.0
    # Past 20 digits the value is outside i64/u64 (and int() could meet Python's digit limit).
    if len(token) <= 20 and _I64_MIN <= (value := int(token)) <= _U64_MAX:
        return value
    return _parse_float(token)


def _parse_float(token: str) -> float:
    if _f64_out_of_range(token):
        shown = token if len(token) <= 40 else f"{token[:20]}... ({len(token):,} characters)"
        raise _Reject(f"the number {shown} is out of range")
    return float(token)


_NUMBER: Final = re.compile(r"-?([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?")
_I32_MAX: Final = 2**31 - 1
_POW10: Final = tuple(float(f"1e{exponent}") for exponent in range(309))  # serde_json's POW10


def _f64_out_of_range(token: str) -> bool:
    """Whether serde_json rejects a JSON number as out of range (serde_json's de.rs).

    Without the ``float_roundtrip`` feature (the reference does not enable it), serde_json
    does not round correctly near f64::MAX: it keeps the leading digits that fit in a u64,
    counts every digit it drops as a power of ten, and multiplies once by a power of ten.
    So it rejects some numbers that round to f64::MAX, such as 1.7976931348623158e308.
    Underflow is never an error.
    """
    match = _NUMBER.fullmatch(token)
    assert match is not None  # json's scanner only hands over valid number tokens
    whole, fraction, exponent_sign, exponent_digits = match.groups()
    # Integer digits: kept while the u64 holds them, then each dropped one adds a power of 10.
    # (Any 19 digits fit; 20 fit up to u64::MAX.)
    kept = min(len(whole), 20 if int(whole[:20]) <= _U64_MAX else 19)
    significand = int(whole[:kept])
    exponent = len(whole) - kept
    if fraction:
        if significand == 0:  # leading zeros of the fraction only move the exponent
            digits = fraction.lstrip("0")
            exponent -= len(fraction) - len(digits)
        else:
            digits = fraction
        for digit in map(int, digits):  # at most ~20 rounds: then the u64 is full
            if significand > _U64_MAX // 10 or (
                significand == _U64_MAX // 10 and digit > _U64_MAX % 10
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
        return math.isinf(float(significand) * _POW10[exponent])
    return significand != 0


def _parse_constant(token: str) -> NoReturn:
    raise _Reject(f"{token} is not valid JSON")


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_Object,
    parse_float=_parse_float,
    parse_int=_parse_int,
    parse_constant=_parse_constant,
)


def _exact_columns(text: str) -> _Columns:
    """serde_json's and serde's reading of the header, rule by rule (format-rules.md 3)."""
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
    except RecursionError:
        _bad_json(f"nesting deeper than {_MAX_DEPTH} arrays and objects")
    _check_tree(top, strings="\\u" in text)
    if type(top) is not _Object:
        _bad_json(f"expected a JSON object at the top level, found {_describe(top)}")
    metadata: dict[str, str] | None = None
    seen_metadata = False
    tensors: dict[str, _Entry] = {}
    for key, value in top:
        if key == _METADATA_KEY:
            if seen_metadata:
                _bad_json('duplicate key "__metadata__"')
            seen_metadata = True
            metadata = _metadata(value)
        else:
            # A repeated tensor name: the last one wins, but every copy must be well-formed.
            tensors[key] = _tensor_entry(key, value)
    names = list(tensors)
    if not names:
        return [], [], [], [], [], metadata
    dtypes, shapes, begins, ends = map(list, zip(*tensors.values(), strict=True))
    return names, dtypes, _interned(shapes)[0], begins, ends, metadata


def _check_tree(top: object, *, strings: bool) -> None:
    """serde_json's nesting limit, and no lone surrogate in any string (keys included)."""
    stack: list[tuple[object, int]] = [(top, 1)]
    while stack:
        node, depth = stack.pop()
        if type(node) is _Object:
            values: Iterable[object] = (value for _, value in node)
            if strings:
                for key, _ in node:
                    _check_string(key)
        elif type(node) is list:
            values = node
        else:
            if strings and type(node) is str:
                _check_string(node)
            continue
        if depth > _MAX_DEPTH:
            _bad_json(f"nesting deeper than {_MAX_DEPTH} arrays and objects")
        stack.extend(zip(values, repeat(depth + 1), strict=False))


def _check_string(value: str) -> None:
    if _SURROGATE.search(value):
        _bad_json(f"lone surrogate escape in the string {value[:40]!r}")


def _metadata(value: object) -> dict[str, str] | None:
    if value is None:
        return None
    if type(value) is not _Object:
        _bad_json(f'"__metadata__" must be an object or null, found {_describe(value)}')
    for key, item in value:
        if type(item) is not str:
            _bad_json(f'"__metadata__" values must be strings; {key!r} is {_describe(item)}')
    return dict(value)


def _tensor_entry(name: str, value: object) -> _Entry:
    if type(value) is _Object:
        fields: dict[str, object] = {}
        for key, item in value:
            if key in _TENSOR_FIELDS:
                if key in fields:
                    _bad_json(f"tensor {name!r}: duplicate field {key!r}", tensor=name)
                fields[key] = item
            # Unknown fields are ignored, as serde does.
        for key in _TENSOR_FIELDS:
            if key not in fields:
                _bad_json(f"tensor {name!r}: missing field {key!r}", tensor=name)
        dtype, shape, offsets = (fields[key] for key in _TENSOR_FIELDS)
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
            f"found {_describe(value)}",
            tensor=name,
        )
    dims = _u64_array(name, "shape", shape)
    span = _u64_array(name, "data_offsets", offsets)
    if len(span) != 2:
        _bad_json(
            f"tensor {name!r}: data_offsets must be [begin, end], found {len(span)} numbers",
            tensor=name,
        )
    return _dtype(name, dtype), dims, span[0], span[1]


def _dtype(name: str, value: object) -> str:
    if type(value) is _Object and len(value) == 1 and value[0][1] is None:
        value = value[0][0]  # serde's map form of a unit variant: {"F32": null}
    if type(value) is not str:
        _bad_json(f"tensor {name!r}: dtype must be a string, found {_describe(value)}", tensor=name)
    if value not in _CANONICAL_DTYPE:
        _bad_json(
            f"tensor {name!r}: unknown dtype {value!r}; expected one of {', '.join(DTYPE_BITS)}",
            tensor=name,
        )
    return _CANONICAL_DTYPE[value]


def _u64_array(name: str, field: str, value: object) -> list[int]:
    if type(value) is not list:
        _bad_json(
            f"tensor {name!r}: {field} must be an array of integers, found {_describe(value)}",
            tensor=name,
        )
    for item in value:
        if type(item) is not int or not 0 <= item <= _U64_MAX:
            _bad_json(
                f"tensor {name!r}: {field} must hold integers in 0..2^64-1, "
                f"found {_describe(item)}",
                tensor=name,
            )
    return value


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is int:
        return f"the integer {value}"
    if type(value) is float:
        if value == 0 and math.copysign(1.0, value) < 0:
            return "-0 (a float to serde_json)"
        return f"the non-integer number {value!r}"
    if type(value) is str:
        shown = value if len(value) <= 40 else value[:40] + "..."
        return f"the string {shown!r}"
    if type(value) is _Object:
        return f"an object with {len(value)} keys"
    return f"an array of {len(value)}"  # type: ignore[arg-type]


def _bad_json(message: str, *, tensor: str | None = None, offset: int | None = None) -> NoReturn:
    _fail("InvalidHeaderDeserialization", message, tensor=tensor, offset=offset)


# --- layout: the reference's Metadata::validate and the file-size check --------------------


def _layout(columns: _Columns) -> _Columns:
    """The reference's Metadata::validate on type-checked columns: sort, then walk."""
    names, _, shapes, begins, ends, _ = columns
    if not names:
        return columns
    chained = _chained(begins, ends)
    if not (chained and all(map(le, begins, ends))):
        columns = _sorted(columns)  # the usual file is in order already
        chained = _chained(columns[3], columns[4])
    if not (chained and _sizes_hold(columns, dict.fromkeys(shapes))):
        _walk(*columns[:5])
    return columns


def _sorted(columns: _Columns) -> _Columns:
    """The rows sorted by (begin, end), as the reference sorts; header order kept for ties."""
    names, dtypes, shapes, begins, ends, metadata = columns
    order = sorted(range(len(names)), key=list(zip(begins, ends, strict=True)).__getitem__)
    return (
        list(map(names.__getitem__, order)),
        list(map(dtypes.__getitem__, order)),
        list(map(shapes.__getitem__, order)),
        list(map(begins.__getitem__, order)),
        list(map(ends.__getitem__, order)),
        metadata,
    )


def _sizes_hold(columns: _Columns, distinct: Collection[_Shape]) -> bool:
    """Whole-column check that chained rows pass the rest of the reference's walk."""
    _, dtypes, shapes, begins, ends, _ = columns
    return (
        # Every span below 2^61 bytes keeps every bit count below 2^64 (no overflow).
        ends[-1] <= _U64_MAX >> 3
        # Also rejects any end < begin: no element count makes a negative size.
        and _sizes_match(dtypes, shapes, begins, ends, distinct)
    )


def _build(columns: _Columns, header_size: int, file_size: int | None) -> Header:
    """The file-size check, then the Header (columns are valid and in offset order)."""
    names, dtypes, shapes, begins, ends, metadata = columns
    data_start = HEADER_LENGTH_SIZE + header_size
    data_end = ends[-1] if ends else 0
    if file_size is not None and data_start + data_end != file_size:
        short = data_start + data_end - file_size
        _fail(
            "MetadataIncompleteBuffer",
            _coverage_message(data_start, data_end, file_size),
            hint=truncation_hint(short) if short > 0 else None,
        )
    infos = list(map(_new, repeat(TensorInfo, len(names))))
    fields: Sequence[Iterable[object]] = (
        names,
        dtypes,
        shapes,
        map(data_start.__add__, begins),
        map(data_start.__add__, ends),
        repeat(data_start),
    )
    for setter, column in zip(_TENSOR_SLOTS, fields, strict=True):
        deque(map(setter, infos, column), maxlen=0)
    return Header(
        tensors=MappingProxyType(dict(zip(names, infos, strict=True))),
        metadata=None if metadata is None else MappingProxyType(metadata),
        header_size=header_size,
        data_size=data_end,
        file_size=file_size,
    )


def _chained(begins: list[int], ends: list[int]) -> bool:
    """The first tensor begins at 0 and each next one where the previous one ends."""
    return begins[0] == 0 and begins[1:] == ends[:-1]


def _sizes_match(
    dtypes: list[str],
    shapes: list[_Shape],
    begins: list[int],
    ends: list[int],
    distinct: Collection[_Shape],
) -> bool:
    """Every span is exactly elements x dtype size, no element count overflowing u64.

    The caller has bounded every span below 2^61 bytes, so bit counts cannot overflow.
    Element counts are computed once per distinct shape (`distinct`: each shape once).
    """
    # Bounds the cost of math.prod. Without a 0, a product is at least 2^(sum of
    # bit_length - 1) and below the square of that: when that lower bound reaches 2^61
    # elements the check gives up (False: the walk decides; only a sub-byte dtype could still
    # match a span below 2^61 bytes), below it no intermediate product exceeds 2^122. A shape
    # with a 0 counts 0 elements without multiplying (its dims may be huge), and is checked
    # below.
    if any(
        0 not in shape and sum(map(int.bit_length, shape)) - len(shape) >= 61 for shape in distinct
    ):
        return False
    count_of = {shape: 0 if 0 in shape else math.prod(shape) for shape in distinct}
    # A zero dim ends a product that may have overflowed before it ([2^32, 2^32, 0]), and
    # hides a dim beyond u64 (a float to serde_json) after it ([0, 2^70]). Any other
    # overflowing count cannot match a span below 2^61.
    if 0 in count_of.values() and any(map(_zero_hides_overflow, distinct)):
        return False
    counts = list(map(count_of.__getitem__, shapes))
    spans = list(map(sub, ends, begins))
    if _SUB_BYTE_DTYPES.isdisjoint(dtypes):
        return list(map(mul, counts, map(_bytes_of, dtypes))) == spans
    return list(map(mul, counts, map(_bits_of, dtypes))) == list(map(mul, spans, repeat(8)))


def _zero_hides_overflow(shape: _Shape) -> bool:
    return 0 in shape and (
        max(shape) > _U64_MAX or any(count > _U64_MAX for count in _running_products(shape))
    )


def _running_products(shape: Iterable[int]) -> Iterator[int]:
    count = 1
    for dim in shape:
        count *= dim
        yield count


def _walk(
    names: list[str],
    dtypes: list[str],
    shapes: list[_Shape],
    begins: list[int],
    ends: list[int],
) -> None:
    """The reference's validation walk over tensors sorted by offsets; the first fault wins."""
    cursor = 0
    for name, dtype, shape, begin, end in zip(names, dtypes, shapes, begins, ends, strict=True):
        if begin != cursor or end < begin:
            if end < begin:
                found = f"its end {end:,} is before its begin {begin:,}"
            elif begin > cursor:
                found = f"a gap of {begin - cursor:,} bytes before it"
            else:
                found = f"it overlaps the previous tensor by {cursor - begin:,} bytes"
            _fail(
                "InvalidOffset",
                f"tensor {name!r}: data_offsets [{begin}, {end}] should begin at {cursor:,}, "
                f"where the previous tensor ends; found {found}",
                tensor=name,
            )
        cursor = end
        count = 1
        for count in _running_products(shape):
            if count > _U64_MAX:
                _fail(
                    "ValidationOverflow",
                    f"tensor {name!r}: the element count of shape {_dims(shape)} overflows 64 bits",
                    tensor=name,
                )
        bits = count * DTYPE_BITS[dtype]
        if bits > _U64_MAX:
            _fail(
                "ValidationOverflow",
                f"tensor {name!r}: the size in bits of {dtype} x {_dims(shape)} overflows 64 bits",
                tensor=name,
            )
        if bits % 8:
            _fail(
                "MisalignedSlice",
                f"tensor {name!r}: {dtype} x {_dims(shape)} is {bits:,} bits, "
                "not a whole number of bytes",
                tensor=name,
            )
        if end - begin != bits // 8:
            _fail(
                "TensorInvalidInfo",
                f"tensor {name!r}: dtype {dtype} and shape {_dims(shape)} need "
                f"{bits // 8:,} bytes, but data_offsets [{begin}, {end}] span "
                f"{end - begin:,} bytes",
                tensor=name,
            )


def _dims(shape: Sequence[int]) -> str:
    if len(shape) > 8:
        return f"[{', '.join(map(str, shape[:8]))}, ... ({len(shape)} dims)]"
    return f"[{', '.join(map(str, shape))}]"


def _coverage_message(data_start: int, data_end: int, file_size: int) -> str:
    covered = data_start + data_end
    if covered < file_size:
        found = f"{file_size - covered:,} bytes after the last tensor"
    else:
        found = f"the file ends {covered - file_size:,} bytes short (truncated?)"
    return (
        f"the tensors cover the data buffer up to file offset {covered:,}, "
        f"but the file is {file_size:,} bytes: {found}"
    )


def _fail(
    kind: str,
    message: str,
    *,
    tensor: str | None = None,
    offset: int | None = None,
    needed: int | None = None,
    hint: str | None = None,
) -> NoReturn:
    raise HeaderError(kind, message, tensor=tensor, offset=offset, needed=needed, hint=hint)


_gc_lock = threading.Lock()
_gc_pauses = 0  # parses under way in this process
_gc_was_enabled = False  # whether the first of them found the collector on


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while parsing.

    A large header makes hundreds of thousands of acyclic objects, and each collection the
    allocations trigger walks all of them: pausing cuts a 100,000-tensor header's time by a
    third. Nothing made here can form a cycle, so nothing is left for the collector.
    Concurrent parses share one pause: the collector is turned back on when the last one
    ends, and only if it was on when the first one began. (A thread that turns it off
    meanwhile finds it on again then: the one race this cannot see.)
    """
    global _gc_pauses, _gc_was_enabled  # noqa: PLW0603 - process-wide, as gc's state is
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()
