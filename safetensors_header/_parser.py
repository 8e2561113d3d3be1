"""The sans-IO core: bytes in, a validated `Header` out.

Layer: core (sans-IO).

Every rule is the reference's (the Rust core of the ``safetensors`` package, ``read_metadata``
and ``Metadata::validate`` in ``safetensors/src/tensor.rs``), applied in its order, so that the
verdict and the error kind on any input are the reference's; docs/format.md states them rule by
rule. (One exception: where two tensors share one offset, the reference's own kind varies
from run to run with its hash-map order, docs/format.md §6; ours is always one it gives.)

Three readers of the JSON give the same result, tried in this order:

* the **canonical reader** takes the form every writer produces (``json.dumps`` of the
  entries with their fields in one order, any JSON whitespace, no backslash anywhere) apart
  with ``str.split('"')`` and proves, with C-level passes over whole columns, that the text is
  exactly that document (see `_canonical_columns` for the proof); texts of 2 MiB and more in
  the reference's compact form are cut at marks put in place of their constant stretches
  instead, four strings per tensor rather than ten (`_compact_columns`). It makes a handful
  of objects, none per tensor, so it needs no pause of the garbage collector;
* the **json reader** runs json's C scanner (set to stop at any float, NaN or Infinity) and
  then checks, with counts over the whole text and one loop over the entries, that nothing
  ``json.loads`` is more lenient about than serde_json could have happened: no duplicate keys
  dropped, no lone surrogate, no ``-0``, no bool where an integer must be. A text under 2,048
  characters goes to it first (faster there, and its few objects are nothing to the
  collector);
* the **exact reader** keeps every key/value pair and number token and applies serde_json's
  and serde's rules one by one. It decides every file the others step aside for (each
  returns ``None`` when it cannot be sure), and writes the error messages.

Before either json-based reader runs, the nesting depth is measured without recursion (§3.11),
so that ``json``'s recursive C scanner never meets more than 127 levels: a thread with a small
stack cannot crash, and a caller deep in its own stack gets the verdict from a fresh thread.

No I/O happens here; the sources feed this module bytes (``bytes_needed`` says how many).
"""

from __future__ import annotations

import json
import re
import sys
from itertools import accumulate, repeat
from json.scanner import make_scanner
from operator import index, itemgetter, le, mul
from types import MappingProxyType

from ._errors import HeaderError
from ._format import (
    DTYPE_BITS,
    HEADER_LENGTH_SIZE,
    MAX_HEADER_SIZE,
    METADATA_KEY,
    TENSOR_FIELDS,
    U64_MAX,
    bytes_needed,
    header_end,
    length_fault,
)
from ._header import TensorTable, make_header, shown_shape

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any, Final, NoReturn, TypeVar

    from ._format import Buffer
    from ._header import Header

    _T = TypeVar("_T")

__all__ = ["JsonObject", "decode_pairs", "parse_file_start", "parse_header"]

_SMALL_TEXT: Final = 2048  # characters: below, the json reader is faster than the canonical one
_I64_MIN: Final = -(2**63)  # serde_json: integers below this are floats (§3.7)
_MAX_DEPTH: Final = 127  # serde_json's recursion limit of 128 leaves 127 nested containers

_CANONICAL_DTYPE: Final = {name: name for name in DTYPE_BITS}  # to keep one object per dtype
_bits_of = DTYPE_BITS.__getitem__
_SUB_BYTE_DTYPES: Final = frozenset(name for name, bits in DTYPE_BITS.items() if bits % 8)
_bytes_per_element = {name: bits // 8 for name, bits in DTYPE_BITS.items()}.__getitem__

# Columns: names, dtypes, shapes, begins, ends, metadata; one row per tensor after "last wins".
_Shape = tuple[int, ...]
_Columns = tuple[list[str], list[str], list[_Shape], list[int], list[int], "dict[str, str] | None"]
_Entry = tuple[str, list[int], int, int]  # dtype, shape, begin, end


def parse_header(
    prefix: Buffer, /, *, file_size: int | None = None, max_header_size: int = MAX_HEADER_SIZE
) -> Header:
    """Parse and validate a safetensors header from bytes that start at file offset 0.

    Args:
        prefix: Any bytes-like object (``bytes``, ``bytearray``, ``memoryview``, ``mmap``)
            holding at least the first ``8 + N`` bytes of the file: the whole file, a partial
            download, a memory map. Bytes past the header are not read. (`bytes_needed`
            says how many bytes that is, from the first 8.)
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

    Safe to call from any number of threads at once, from a signal handler or ``__del__``
    while another parse runs, and from any depth of the caller's stack: it keeps no state.
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
    return _read_text(text, header_size, file_size)


def parse_file_start(data: bytes, file_size: int, limit: int) -> Header | int:
    """`parse_header` of a file's first bytes `data`, for a reader that knows the file's size
    and can read more: the `Header` when `data` holds the whole header, else the number of
    bytes from offset 0 it takes (`bytes_needed`'s answer: read them and call again, or
    hand what the file gives to `parse_header`). Raises what the length prefix decides.

    The same verdicts as `parse_header`, without its buffer handling: a local file's read,
    the common case of `read_header`.
    """
    stop = header_end(data, file_size, limit)
    if stop is None:  # a bad length prefix: its verdict, or the few more bytes that tell it
        return bytes_needed(data, file_size=file_size, max_header_size=limit)
    if stop > len(data):
        return stop
    return _read_text(_decode_utf8(memoryview(data), stop), stop - HEADER_LENGTH_SIZE, file_size)


def _read_text(text: str, header_size: int, file_size: int | None) -> Header:
    """The `Header` of a decoded header text (`header_size`: N, the file's size if known)."""
    # A small header goes straight to json's decoder: it is faster there (measured), and makes
    # too few objects to matter to the collector.
    columns = None if len(text) < _SMALL_TEXT else _canonical_columns(text)
    if columns is None:
        columns = _json_or_exact_columns(text)
    return _build(columns, header_size, file_size)


def _split(view: memoryview, file_size: int | None, limit: int) -> tuple[int, str]:
    """The reference's checks 1-4 (§1.2): the length prefix, its limit, the file size, UTF-8."""
    have = len(view)
    stop = header_end(view, have if file_size is None else file_size, limit)
    if stop is not None:
        if stop > have:
            _prefix_too_short(have, stop)
        return stop - HEADER_LENGTH_SIZE, _decode_utf8(view, stop)
    if have < HEADER_LENGTH_SIZE and file_size is not None and file_size >= HEADER_LENGTH_SIZE:
        _prefix_too_short(have, HEADER_LENGTH_SIZE)
    fault = length_fault(view, file_size, limit)
    assert fault is not None  # a sound length prefix returned above
    # Judged as a whole file: say how many bytes would have done (a partial download).
    if file_size is None and fault.kind == "HeaderTooSmall":
        fault.needed = HEADER_LENGTH_SIZE
    elif file_size is None and fault.kind == "InvalidHeaderLength":
        fault.needed = HEADER_LENGTH_SIZE + int.from_bytes(view[:HEADER_LENGTH_SIZE], "little")
    raise fault


def _prefix_too_short(have: int, needed: int) -> NoReturn:
    """§1.8: the bytes given end before the header, though the file is long enough."""
    if needed == HEADER_LENGTH_SIZE:
        message = f"need the first 8 bytes of the file to read the header length, got {have}"
    else:
        message = f"the header ends at byte {needed:,} but only {have:,} bytes were given"
    _fail("PrefixTooShort", message, needed=needed)


def _decode_utf8(view: memoryview, stop: int) -> str:
    """§1.7, §3.1: the header is strict UTF-8 (never guessed UTF-16 or UTF-32)."""
    try:
        return str(view[HEADER_LENGTH_SIZE:stop], "utf-8")
    except UnicodeDecodeError as error:
        from ._diagnose import SNIFF_SIZE, sniff

        _fail(
            "InvalidHeader",
            f"the header is not valid UTF-8: {error.reason} at byte {error.start:,} of the "
            f"header (file offset {HEADER_LENGTH_SIZE + error.start:,})",
            offset=HEADER_LENGTH_SIZE + error.start,
            hint=sniff(bytes(view[:SNIFF_SIZE])),
        )


# --- the canonical reader -------------------------------------------------------------------

_JSON_WHITESPACE: Final = " \t\r\n"
_WHITESPACE_RUN: Final = re.compile("[ \t\r\n]*")  # json's own: scans without copying
_SHORT_TAIL: Final = 64  # characters after a JSON value checked by str.strip, not the pattern
# Whitespace between two word characters would split a number or `null` in two: removing it
# would join two tokens into one.
_WORD_GAP: Final = re.compile("[0-9A-Za-z_][ \t\r\n]+[0-9A-Za-z_]")
_CONTROL_BYTES: Final = bytes(range(0x20))  # raw U+0000-U+001F are never allowed in a string
_UINT: Final = "(?:0|[1-9][0-9]{0,19})"  # a JSON integer of at most 20 digits, no sign
_UINT_LIST: Final = f"(?:{_UINT}(?:,{_UINT})*)?"
# Numbers of 1 to 20 digits; the scan that reads them rejects a leading zero. Possessive
# repeats (Python 3.11+) never backtrack: faster.
_POSSESSIVE: Final = "+" if sys.version_info >= (3, 11) else ""
_DIGITS: Final = "[0-9]{1,20}" + _POSSESSIVE
# The insides of the distinct shapes, joined by "],[".
_SHAPE_LISTS: Final = re.compile(rf"{_UINT_LIST}(?:\],\[{_UINT_LIST})*")


def _entry_template(order: tuple[str, ...]) -> tuple[tuple[tuple[int, str], ...], int, int, int]:
    """Where each part of a tensor entry is, for one order of its three fields.

    An entry ``"name":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},`` split at its quotes
    is ten parts: the name, ``:{``, then per field its key and its value's parts: ``:``, the
    dtype string and the separator after it for ``dtype`` (``,`` or ``},`` when it is the last
    field); one part ``:[...],`` (``:[...]},`` when last) for ``shape`` and for
    ``data_offsets``. Returns the constant parts as (position, text), and the positions of
    the dtype, the shape part and the offsets part.
    """
    constants = [(1, ":{")]
    positions = {}
    at = 2
    for number, field in enumerate(order):
        separator = "}," if number == len(order) - 1 else ","
        constants.append((at, field))
        if field == "dtype":
            constants += [(at + 1, ":"), (at + 3, separator)]
            positions[field] = at + 2
            at += 4
        else:
            positions[field] = at + 1
            at += 2
    return tuple(constants), positions["dtype"], positions["shape"], positions["data_offsets"]


_ORDERS: Final[dict[tuple[str, ...], tuple[tuple[tuple[int, str], ...], int, int, int]]] = {
    order: _entry_template(order)
    for order in (
        (a, b, c)
        for a in TENSOR_FIELDS
        for b in TENSOR_FIELDS
        for c in TENSOR_FIELDS
        if len({a, b, c}) == 3
    )
}
_ENTRY_PARTS: Final = 10
# json's C scanner itself, without json.loads' checks of a text already checked here.
_scan: Final = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed: a class


def _canonical_columns(text: str) -> _Columns | None:
    """Read the form writers produce, at C speed and with no object per tensor; else None.

    The form: no backslash anywhere; an object of an optional ``__metadata__`` first (an
    object of strings, ``{}`` or ``null``) and then tensor entries, each an object of exactly
    ``dtype`` (a string), ``shape`` and ``data_offsets`` (arrays of integers), in one order
    of those fields shared by all entries; any JSON whitespace between tokens.

    Why what it accepts is exactly what serde_json and serde read (docs/format.md §3-§4):

    1. With no backslash there are no escapes, so every ``"`` in a valid document opens or
       closes a string: ``text.split('"')`` alternates between the text outside strings (even
       parts) and the strings' contents (odd parts), each of which is its own value.
    2. An odd part is a valid string body when it holds no raw U+0000-U+001F (checked on all
       of them at once); ``"`` and ``\\`` cannot be in it. UTF-8 was decoded strictly, so it
       holds no surrogate.
    3. The even parts, with JSON whitespace removed (never between two word characters, where
       it would split a number or ``null``: such a text goes elsewhere), must equal the
       template's constant tokens, and the value parts must match patterns of unsigned
       integers of at most 20 digits with no leading zero (checked: at most 2^64-1). So the
       text is that document, token for token, with whitespace between tokens, which JSON
       allows; nesting is 3 levels deep; after the object only whitespace.
    4. The names are distinct and none is ``__metadata__``: no duplicate key at the top
       level, where serde keeps the last and json the last too, but the layout check would
       see only one. Keys repeated inside ``__metadata__`` keep the last value in both.
    5. Every number is an integer in 0..2^64-1, which serde reads as a u64 (not a float);
       dtypes are looked up in the table of the 22 names. Offsets in the order of the data
       (the usual file) are instead compared, as text, with the layout the sizes chain
       into (`_chained_ends`), which proves them and the layout at once.

    Anything else, and every document that is not valid, returns None: the json and exact
    readers decide it, with their messages.
    """
    if "\\" in text:
        return None
    if len(text) >= _COMPACT_MIN and _MARKS[0][0] in text:
        columns = _compact_columns(text.rstrip(_JSON_WHITESPACE))
        if columns is not None:
            return columns
    parts = text.split('"')
    if len(parts) < 3:
        return None
    parts[0] = parts[0].lstrip(_JSON_WHITESPACE)
    parts[-1] = parts[-1].rstrip(_JSON_WHITESPACE)
    last = parts[-1]
    columns = _template_columns(parts)
    if columns is None:
        parts[-1] = last  # as split (the attempt rewrote its end)
        if _without_whitespace(parts):
            columns = _template_columns(parts)
    return columns


# The compact form's entry, cut at its constant tokens (the reference's field order).
_MARKS: Final = (
    ('":{"dtype":"', "\x01"),
    ('","shape":[', "\x02"),
    ('],"data_offsets":[', "\x03"),
    (']},"', "\x04"),
)
_ENTRY_MARKS: Final = b"\x01\x02\x03\x04"
_ONE_MARK: Final = str.maketrans("\x02\x03\x04", "\x01\x01\x01")
_NOT_CONTROL: Final = bytes(range(0x20, 0x100))  # UTF-8 puts no byte below 0x80 in a letter
# Below this many characters, `_template_columns` reads the compact form faster (measured: it
# makes 10 strings per tensor to `_compact_columns`' 4, but four replaces cost ~1 ns a byte).
_COMPACT_MIN: Final = 2 * 2**20
_PIECES: Final = ("", '"', "")  # the offsets' form for `_chained_ends`: "B,E" joined by '"'
_OFFSET_PAIRS: Final = re.compile(rf'(?:{_DIGITS},{_DIGITS}")*{_POSSESSIVE}')


def _compact_columns(text: str) -> _Columns | None:
    """The compact form the reference and most writers produce, read with C-level passes over
    the text and 4 strings per tensor; else None (`_canonical_columns` tries other forms).

    The form: ``{`` then an optional ``"__metadata__":...,`` member, then entries
    ``"NAME":{"dtype":"DT","shape":[S],"data_offsets":[B,E]}`` joined by ``,``, then ``}``;
    no whitespace, no backslash (the caller has checked), trailing whitespace stripped.

    Why what it accepts is exactly that document (and so what serde_json and serde read):

    1. Each constant stretch of an entry (``":{"dtype":"``, ``","shape":[``,
       ``],"data_offsets":[`` and ``]},"`` between entries) is replaced by one of the
       characters U+0001-U+0004, which the text does not hold (checked): the marked text
       maps back to the text by putting the stretches back.
    2. Every byte below 0x20 of the marked text's UTF-8 is a mark (UTF-8 encodes no letter
       with such a byte), in the order 1, 2, 3, 4, 1, 2, 3, 4, ..., 1, 2, 3: so the text
       holds no raw control character at all, and its entries' stretches are in order.
    3. The last '"' ends the head; the rest has no '"' and ends with ``]}}``. The head, a
       '"' put back, is ``{"`` or a metadata member read as `_template_columns` does (no
       mark in it: the rest holds all of them). The rest is cut at the marks into 4 pieces
       per entry: its name, dtype, shape and offsets, none of which holds a '"'.
    4. Names are distinct and none is ``__metadata__``; dtypes are among the 22; shapes are
       lists of integers of at most 20 digits, with no leading zero; offsets are two such
       integers. So the text is that document, which is valid JSON; numbers are checked to
       be at most 2^64-1 (shapes here, offsets by the layout check), so serde reads each
       as a u64. (Offsets in the order of the data are checked instead by writing the
       layout the sizes chain into and comparing texts, `_chained_ends`.)
    """
    if any(mark in text for _, mark in _MARKS) or not text.endswith("]}}"):
        return None
    marked = text
    for stretch, mark in _MARKS:
        marked = marked.replace(stretch, mark)
    signature = marked.encode().translate(None, _NOT_CONTROL)
    tensors = (len(signature) + 1) // len(_ENTRY_MARKS)
    if signature != (_ENTRY_MARKS * tensors)[:-1]:
        return None
    head, _, rest = marked.rpartition('"')
    pieces = rest[:-3].translate(_ONE_MARK).split("\x01")
    if len(pieces) != len(_ENTRY_MARKS) * tensors:
        return None  # a mark in the head
    valid, metadata = _compact_head(head)
    if not valid:
        return None
    names = pieces[0::4]
    distinct = set(names)  # (half the cost of the index a lookup builds if it needs one)
    if len(distinct) != tensors or METADATA_KEY in distinct:
        return None
    del distinct
    try:
        dtypes = list(map(_CANONICAL_DTYPE.__getitem__, pieces[1::4]))
    except KeyError:
        return None
    shaped = _canonical_shapes(pieces[2::4])
    if shaped is None:
        return None
    shapes, counts, count_of = shaped
    # "B,E" pieces joined with '"', which none holds.
    offsets = '"'.join(pieces[3::4])
    ends = _chained_ends(dtypes, counts, offsets, _PIECES)
    if ends is not None:
        return names, dtypes, shapes, [0, *ends[:-1]], ends, metadata
    if not _OFFSET_PAIRS.fullmatch(offsets + '"'):  # matches piece by piece
        return None
    try:  # one scan of a JSON array, which rejects a leading zero
        values: list[int] = _scan("[" + offsets.replace('"', ",") + "]", 0)[0]
    except ValueError:
        return None
    columns = (names, dtypes, shapes, values[0::2], values[1::2], metadata)
    return _in_order(columns, count_of)


def _compact_head(head: str) -> tuple[bool, dict[str, str] | None]:
    """Whether a compact head (``{`` or ``{"__metadata__":...,``) is one; its metadata."""
    parts = head.split('"')
    if parts[0] != "{":
        return False, None
    first, metadata = _metadata_member(parts)  # (the marks' order rules out control characters)
    return first == len(parts), metadata


def _metadata_member(parts: list[str]) -> tuple[int, dict[str, str] | None]:
    """After ``{`` (``parts[0]``, the text split at its quotes), an optional ``__metadata__``
    member: where the first tensor's name is, 0 if the member is not one; the metadata.

    Its strings are not checked for raw control characters here.
    """
    if len(parts) < 3 or parts[1] != METADATA_KEY:
        return 1, None
    value = parts[2]
    if value in (":null,", ":{},"):
        return 3, None if value == ":null," else {}
    if value == ":{":
        metadata, first = _canonical_metadata(parts)
        if metadata is not None:
            return first, metadata
    return 0, None


def _without_whitespace(parts: list[str]) -> bool:
    """Remove the whitespace between tokens, if any: whether there was some to remove.

    Leaves the parts alone (False) when whitespace stands between two word characters
    (``[1 2]``): there it separates tokens that removing it would join.
    """
    outside = '"'.join(parts[0::2])
    # json.dumps' own separators first: a space after ':' or ',' (outside strings, both are
    # tokens) never stands between two word characters.
    cleaned = outside.replace(": ", ":").replace(", ", ",")
    if any(space in cleaned for space in _JSON_WHITESPACE):
        if _WORD_GAP.search(cleaned):
            return False
        for space in _JSON_WHITESPACE:
            cleaned = cleaned.replace(space, "")
    elif cleaned is outside:
        return False
    parts[0::2] = cleaned.split('"')
    return True


def _template_columns(parts: list[str]) -> _Columns | None:
    """`_canonical_columns` on the parts between quotes (the last one it rewrites)."""
    last = parts[-1]
    # The text ends with the last entry's (or the metadata's) '}' and the top level's '}';
    # written as "}," like every other entry's end, all entries have the same parts.
    if parts[0] != "{" or not last.endswith("}}"):
        return None
    parts[-1] = last[:-1] + ","
    count = len(parts)
    first, metadata = _metadata_member(parts)
    if not first or _has_control_character('"'.join(parts[3 : first - 1 : 2])):
        return None  # not a metadata member, or a raw control character in its strings
    tensors, rest = divmod(count - first, _ENTRY_PARTS)
    if rest or not tensors:
        return None  # a header without tensors is small: the other readers are as fast
    order = _field_order(parts, first)
    if order is None:
        return None
    constants, dtype_at, shape_at, offsets_at = _ORDERS[order]
    for at, expected in constants:
        if parts[first + at :: _ENTRY_PARTS].count(expected) != tensors:
            return None
    names = parts[first::_ENTRY_PARTS]
    distinct = set(names)  # (a set is half the cost of the index a lookup builds if it needs it)
    if len(distinct) != tensors or METADATA_KEY in distinct:
        return None  # a repeated name, or __metadata__ again or elsewhere
    del distinct
    if _has_control_character('"'.join(names)):
        return None  # a raw control character
    try:
        dtypes = list(map(_CANONICAL_DTYPE.__getitem__, parts[first + dtype_at :: _ENTRY_PARTS]))
    except KeyError:
        return None
    last_field = order[-1]
    shaped = _canonical_shapes(
        parts[first + shape_at :: _ENTRY_PARTS], "}," if last_field == "shape" else ","
    )
    if shaped is None:
        return None
    shapes, counts, count_of = shaped
    separator = "}," if last_field == "data_offsets" else ","
    # No part holds a '"' (they come from splitting at them): joined with '"', each '"' is
    # where a part ends.
    joined = '"'.join(parts[first + offsets_at :: _ENTRY_PARTS])
    closing = "]" + separator
    ends = _chained_ends(dtypes, counts, joined, (":[", closing + '":[', closing))
    if ends is not None:
        return names, dtypes, shapes, [0, *ends[:-1]], ends, metadata
    offsets = _canonical_offsets(joined, separator)
    if offsets is None:
        return None
    return _in_order((names, dtypes, shapes, offsets[0::2], offsets[1::2], metadata), count_of)


def _canonical_metadata(parts: list[str]) -> tuple[dict[str, str] | None, int]:
    """``"__metadata__":{"k":"v",...}``: the map and where the first tensor's name is."""
    # Parts 3, 5, 7, ... are keys and values; 4, 8, ... ":"; 6, 10, ... "," and the last "},".
    try:
        end = parts.index("},", 6)
    except ValueError:
        return None, 0
    pairs, rest = divmod(end - 2, 4)
    if rest or parts[4 : end + 1 : 4].count(":") != pairs or parts[6:end:4].count(",") != pairs - 1:
        return None, 0  # a key or value "},", or not an object of strings
    return dict(zip(parts[3:end:4], parts[5:end:4], strict=True)), end + 1


def _field_order(parts: list[str], first: int) -> tuple[str, ...] | None:
    """The order of the first entry's fields, when it is a permutation of the three."""
    order: list[str] = []
    at = first + 2
    for _ in TENSOR_FIELDS:
        # Distinct fields so far keep `at` within the entry's 10 parts (at most first + 8).
        field = parts[at]
        if field not in TENSOR_FIELDS or field in order:
            return None
        order.append(field)
        at += 4 if field == "dtype" else 2
    return tuple(order)


def _canonical_shapes(
    column: list[str], separator: str | None = None
) -> tuple[list[_Shape], list[int] | None, dict[_Shape, int] | None] | None:
    """A column of shapes as tuples, each distinct one parsed once; None if not so.

    The column holds a shape's insides (``2,3``), or with `separator` a ``:[2,3]`` part and
    the separator after it. Also the element count of each row and of each distinct shape
    (see `_element_counts`; both None when the counts cannot decide). Rows are looked up by
    their text, whose hash a string keeps, rather than by their tuple, whose hash is
    computed at every lookup.
    """
    distinct = list(dict.fromkeys(column))
    insides = distinct
    if separator is not None:
        closing = "]" + separator
        if not (
            all(map(str.startswith, distinct, repeat(":[")))
            and all(map(str.endswith, distinct, repeat(closing)))
        ):
            return None
        end = -len(closing)
        insides = [part[2:end] for part in distinct]
    joined = "],[".join(insides)
    if not _SHAPE_LISTS.fullmatch(joined):
        return None
    parsed = list(map(tuple, _scan(f"[[{joined}]]", 0)[0]))
    if len(parsed) != len(distinct):
        return None  # a part held "],[": more lists than parts
    if max(map(max, filter(None, parsed)), default=0) > U64_MAX:
        return None  # a u64 is at most 20 digits, not every 20 digits are a u64
    shapes = list(map(dict(zip(distinct, parsed, strict=True)).__getitem__, column))
    count_of = _element_counts(parsed)
    if count_of is None:
        return shapes, None, None
    counts = dict(zip(distinct, map(count_of.__getitem__, parsed), strict=True))
    return shapes, list(map(counts.__getitem__, column)), count_of


# Each part of an offsets column followed by a '"' (which no part holds, so that a repetition
# of the pattern is exactly one part).
_OFFSET_PARTS: Final = {
    separator: re.compile(rf'(?::\[{_DIGITS},{_DIGITS}\]{re.escape(separator)}")*{_POSSESSIVE}')
    for separator in (",", "},")
}


_SPACES_FOR_MARKUP: Final = str.maketrans(':[]}"', "     ")  # all that is not a number or ','


def _canonical_offsets(joined: str, separator: str) -> list[int] | None:
    """The ``:[begin,end]`` parts (joined with '"') as one flat list of integers; None if not
    so."""
    # A pattern ending in '"' with no other '"' matches part by part.
    if not _OFFSET_PARTS[separator].fullmatch(joined + '"'):
        return None
    # ':[0,8]},":[8,32]},' -> "  0,8  ,   8,32  ": one scan of a JSON array of integers,
    # which rejects a leading zero (serde_json does too, and the json reader decides).
    inner = joined.translate(_SPACES_FOR_MARKUP)[:-1]
    try:
        values: list[int] = _scan(f"[{inner}]", 0)[0]
    except ValueError:
        return None
    return values


def _chained_ends(
    dtypes: list[str], counts: list[int] | None, joined: str, form: tuple[str, str, str]
) -> list[int] | None:
    """The rows' ends when their offsets are exactly the layout their sizes chain into; else
    None (the offsets are then read and checked as they are).

    `joined` is the rows' offsets text in a `form` (opening, between, closing): the opening,
    then ``B,E`` per row, joined by the between, then the closing. `counts` are the rows'
    element counts (None: see `_element_counts`).

    Why this is what reading the offsets and checking them would give: the sizes (exact
    counts times whole bytes) chain into begins 0, E0, E1, ... and ends E0, E1, E2, ...;
    with the last end below 2^61 no size in bits overflows 64 bits. When the text is these
    numbers written as JSON writes them (str(int): no sign, no leading zero), it holds
    exactly those u64 offsets, so the rows are chained (each begins where the previous one
    ends, the first at 0) and every span is its size: the reference's walk passes them in
    this order. Writing the numbers costs about what reading them would, but there are half
    as many (each end is the next begin) and no pattern or chain check is left to run.
    """
    opening, between, closing = form
    if counts is None or not joined.startswith(opening + "0,"):
        return None  # (a file out of offset order usually fails here, at no cost)
    if not _SUB_BYTE_DTYPES.isdisjoint(dtypes):
        return None  # sizes in bits: `_sizes_hold` checks those
    ends = list(accumulate(map(mul, counts, map(_bytes_per_element, dtypes))))
    if ends[-1] > U64_MAX >> 3:
        return None
    texts = list(map(str, ends))
    rows = len(texts)
    items = [between] * (4 * rows - 1)  # B "," E between B "," E ... E
    items[0::4] = ["0", *texts[:-1]]
    items[1::4] = [","] * rows
    items[2::4] = texts
    return ends if joined == opening + "".join(items) + closing else None


def _has_control_character(strings: str) -> bool:
    encoded = strings.encode()
    return len(encoded.translate(None, _CONTROL_BYTES)) != len(encoded)


def _in_order(columns: _Columns, count_of: dict[_Shape, int] | None) -> _Columns | None:
    """The columns in the reference's order, if its walk passes them all; else None.

    `count_of`: each distinct shape's element count (None: the counts cannot decide, see
    `_element_counts`).
    """
    if count_of is None:
        return None
    if not _chained(columns[3], columns[4]):
        columns = _sort_by_offsets(columns)
        if not _chained(columns[3], columns[4]):
            return None
    return columns if _sizes_hold(columns, count_of) else None


# --- the json and exact readers ---------------------------------------------------------------


def _json_or_exact_columns(text: str) -> _Columns:
    """The json reader, else the exact one; the depth limit first, without recursion."""
    _reject_deep_nesting(text)
    try:
        columns = _fast_columns(text)
        if columns is None:
            columns = _validate_layout(_exact_columns(text))
    except RecursionError:
        # Not the input's fault (it is at most 127 levels deep): the caller's stack is. A
        # fresh thread has a fresh recursion count.
        return _in_fresh_thread(_json_or_exact_columns, text)
    return columns


_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS: Final = bytes(set(range(256)) - set(b"[]{}"))  # UTF-8 keeps brackets one byte
_DEPTH_STEP: Final = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _reject_deep_nesting(text: str) -> None:
    """§3.11: serde_json's nesting limit, found by counting brackets outside strings.

    For a valid document this is its depth; for an invalid one any verdict here is the one
    the JSON readers would give (InvalidHeaderDeserialization).
    """
    if text.count("[") + text.count("{") <= _MAX_DEPTH:
        return  # no deeper than the brackets it opens
    # With no escaped quote, quotes delimit strings.
    outside = _STRING.sub("", text) if '\\"' in text else "".join(text.split('"')[0::2])
    brackets = outside.encode().translate(None, _NOT_BRACKETS)
    if max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > _MAX_DEPTH:
        _bad_json(f"nesting deeper than {_MAX_DEPTH} arrays and objects")


def _in_fresh_thread(function: Callable[[str], _T], argument: str) -> _T:
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


# --- the fast path ------------------------------------------------------------------------


# \u escapes json.loads would read differently from serde_json, or that would defeat the
# json reader's counting: of printable ASCII (could spell a key such as "dtype", or a ':' or
# '-' it counts) and of surrogates (Python accepts lone ones).
_RISKY_ESCAPE: Final = re.compile(r"\\u(?:00[2-7]|[dD][89a-fA-F])")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


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
    try:  # json's C scanner itself; it stops at any float, NaN or Infinity
        top, scanned = _fast_scan(text, 0)
    except (ValueError, StopIteration):  # StopIteration: no value at 0 (or whitespace)
        return None
    if type(top) is not dict:
        return None
    # Only whitespace after the value: a writer's padding (to 8 bytes) is stripped, a long
    # tail scanned by the pattern (str.strip with characters is slower on long strings).
    tail = len(text) - scanned
    if tail and (
        text[scanned:].strip(_JSON_WHITESPACE)
        if tail <= _SHORT_TAIL
        else _WHITESPACE_RUN.match(text, scanned).end() != len(text)  # type: ignore[union-attr]
    ):
        return None
    kept_keys = len(top)
    kept = "".join(top)
    metadata: dict[str, str] | None = top.pop(METADATA_KEY, None)
    if metadata is not None:
        if type(metadata) is not dict:
            return None
        for value in metadata.values():
            if type(value) is not str:
                return None
        kept_keys += len(metadata)
        kept += "".join(metadata) + "".join(metadata.values())
    names = list(top)
    kept_keys += 3 * len(names)
    # Each key in the text has exactly one ':' after it; every other ':' is inside a string.
    # If the text holds exactly as many ':' as the keys and strings we kept, json.loads'
    # "last wins" dropped nothing: no duplicate key anywhere, at any level. Likewise a '-'
    # outside the kept strings is a negative number somewhere (or "-0", which json.loads
    # reads as the integer 0 and serde_json as a float), and an 'e' beyond the one in each
    # of the three field names per entry and the hex digits of \u escapes is a true or a
    # false (the decoder already stopped at any float). Dtype names are upper case: the
    # strings not kept hold no ':', '-' or 'e'.
    if text.count(":") != kept_keys + kept.count(":"):
        return None
    if "-" in text and text.count("-") != kept.count("-"):
        return None
    if not _e_accounted_for(text, 3 * len(names) + kept.count("e")):
        return None
    # A plain loop, not whole-column passes: it is as fast on large headers (measured), and
    # a small one touches less code, which is most of its cost when that code is not cached.
    dtypes: list[str] = []
    shapes: list[_Shape] = []
    begins: list[int] = []
    ends: list[int] = []
    distinct: dict[_Shape, _Shape] = {}  # one tuple per distinct shape (a checkpoint has few)
    for entry in top.values():
        # Only objects of exactly dtype, shape and data_offsets get through: a list entry
        # (array form) raises TypeError, a missing field KeyError, a map-form dtype
        # TypeError (unhashable), an unknown dtype KeyError, offsets that are not a pair
        # ValueError (or TypeError), a shape holding an array or object TypeError
        # (unhashable). No entry has a fourth key: the ':' count allowed three per entry.
        try:
            dtype = _CANONICAL_DTYPE[entry["dtype"]]
            dims = entry["shape"]
            shape = tuple(dims)
            begin, end = entry["data_offsets"]
            shape = distinct.setdefault(shape, shape)
        except (TypeError, KeyError, ValueError):
            return None
        if type(dims) is not list or type(begin) is not int or type(end) is not int:
            return None
        dtypes.append(dtype)
        shapes.append(shape)
        begins.append(begin)
        ends.append(end)
    # JSON integers only: the text holds no float and no bool (above), so equal shapes are
    # equal integers and the distinct ones tell the types of all (`_element_counts` checks
    # them). No negative number is in the text; offsets too large are caught by the layout
    # check (last end bounded).
    columns: _Columns = (names, dtypes, shapes, begins, ends, metadata)
    if not names:
        return columns
    if not _chained(begins, ends):
        columns = _sort_by_offsets(columns)
        if not _chained(columns[3], columns[4]):
            return None
    # Chained with every size matching means every end >= begin: the rows are in the
    # reference's order, and its walk would pass them.
    return columns if _sizes_hold(columns, _element_counts(distinct)) else None


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
_fast_scan: Final = make_scanner(
    json.JSONDecoder(parse_float=_no_float, parse_constant=_no_float)  # type: ignore[arg-type]
)


def _interned(shapes: Iterable[Iterable[int]]) -> tuple[list[_Shape], dict[_Shape, _Shape]]:
    """Shapes as tuples, one object per distinct shape (a checkpoint has few); the distinct."""
    tuples = list(map(tuple, shapes))
    distinct: dict[_Shape, _Shape] = {}
    return list(map(distinct.setdefault, tuples, tuples)), distinct


# --- the exact path -----------------------------------------------------------------------


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


_NUMBER: Final = re.compile(r"-?([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?")
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
    match = _NUMBER.fullmatch(token)
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


def _exact_columns(text: str) -> _Columns:
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
        return [], [], [], [], [], metadata
    dtypes, shapes, begins, ends = map(list, zip(*tensors.values(), strict=True))
    return names, dtypes, _interned(shapes)[0], begins, ends, metadata


def _read_top_level(top: object) -> tuple[dict[str, str] | None, dict[str, _Entry]]:
    """§4.1-§4.2, §4.4, §4.11: an object; `__metadata__` once; a repeated name, the last."""
    if type(top) is not JsonObject:
        _bad_json(f"expected a JSON object at the top level, found {_describe_value(top)}")
    metadata: dict[str, str] | None = None
    seen_metadata = False
    tensors: dict[str, _Entry] = {}
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
    if _SURROGATE.search(value):
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


def _read_tensor_entry(name: str, value: object) -> _Entry:
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
    if value not in _CANONICAL_DTYPE:
        _bad_json(
            f"tensor {name!r}: unknown dtype {value!r}; expected one of {', '.join(DTYPE_BITS)}",
            tensor=name,
        )
    return _CANONICAL_DTYPE[value]


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
    _fail("InvalidHeaderDeserialization", message, tensor=tensor, offset=offset)


# --- layout: the reference's Metadata::validate and the file-size check --------------------


def _validate_layout(columns: _Columns) -> _Columns:
    """The reference's Metadata::validate on type-checked columns: sort, then walk."""
    names, _, shapes, begins, ends, _ = columns
    if not names:
        return columns
    chained = _chained(begins, ends)
    if not (chained and all(map(le, begins, ends))):
        columns = _sort_by_offsets(columns)  # the usual file is in order already
        chained = _chained(columns[3], columns[4])
    if not (chained and _sizes_hold(columns, _element_counts(dict.fromkeys(shapes)))):
        _walk(*columns[:5])
    return columns


def _sort_by_offsets(columns: _Columns) -> _Columns:
    """§5.1, §6.3: the rows sorted by (begin, end); ties in header order (the reference's
    order for ties varies from run to run)."""
    names, dtypes, shapes, begins, ends, metadata = columns
    rows = range(len(names))
    if len(set(begins)) == len(begins):
        order = sorted(rows, key=begins.__getitem__)  # ints: no tuple per row to make
    else:  # zero-size tensors share a begin with their neighbour: by (begin, end)
        order = sorted(rows, key=list(zip(begins, ends, strict=True)).__getitem__)
    if len(order) == 1:
        return columns
    pick = itemgetter(*order)
    return (
        list(pick(names)),
        list(pick(dtypes)),
        list(pick(shapes)),
        list(pick(begins)),
        list(pick(ends)),
        metadata,
    )


def _sizes_hold(columns: _Columns, count_of: dict[_Shape, int] | None) -> bool:
    """Whether chained rows pass the rest of the reference's walk: every row's span is
    exactly its elements x its dtype's size.

    `count_of`: each distinct shape's element count (None: they cannot decide, see
    `_element_counts`).
    """
    _, dtypes, shapes, _, ends, _ = columns
    # Every span below 2^61 bytes keeps every bit count below 2^64 (no overflow).
    if count_of is None or ends[-1] > U64_MAX >> 3:
        return False
    # The rows are chained (each begins where the previous one ends, the first at 0), so the
    # spans all match exactly when the running sum of the sizes, in bits, is 8 x each row's
    # end; the sizes are never negative, so neither is any span; and a running sum of 8 x
    # whole bytes at every row makes each row whole bytes.
    total = 0
    for dtype, shape, end in zip(dtypes, shapes, ends, strict=True):
        total += count_of[shape] * _bits_of(dtype)
        if total != end << 3:
            return False
    return True


def _build(columns: _Columns, header_size: int, file_size: int | None) -> Header:
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
    _fail(
        "MetadataIncompleteBuffer",
        f"the tensors cover the data buffer up to file offset {covered:,}, "
        f"but the file is {file_size:,} bytes: {found}",
        # The message has the shortfall; the hint only what to do about it.
        hint="an interrupted download or copy? Fetch it again" if covered > file_size else None,
    )


def _chained(begins: list[int], ends: list[int]) -> bool:
    """The first tensor begins at 0 and each next one where the previous one ends."""
    return begins[0] == 0 and begins[1:] == ends[:-1]


def _element_counts(distinct: Iterable[_Shape]) -> dict[_Shape, int] | None:
    """Each distinct shape's element count; None when a shape is not a product of u64
    integers that stays within u64 at every step (the walk then decides).

    Each factor and each partial product is checked as it comes, the reference's checked
    product: no product grows past 128 bits, whatever the shape. A zero does not end the
    checks: [2^32, 2^32, 0] overflows before the 0 (the reference fails), and [0, 2^70] hides
    a dim beyond u64 (a float to serde_json) after it. The json reader's shapes are checked
    here to be integers, too.
    """
    count_of = {}
    for shape in distinct:  # a checkpoint has a few distinct shapes
        count = 1
        for dim in shape:
            if type(dim) is not int or not 0 <= dim <= U64_MAX:
                return None
            count *= dim
            if count > U64_MAX:
                return None
        count_of[shape] = count
    return count_of


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
    _fail(
        "InvalidOffset",
        f"tensor {name!r}: data_offsets [{begin}, {end}] should begin at {cursor:,}, "
        f"where the previous tensor ends; found {found}",
        tensor=name,
    )


def _check_element_count(name: str, shape: _Shape) -> int:
    """§5.5: the shape multiplied left to right in 64 bits; the count."""
    count = 1
    for count in _running_products(shape):
        if count > U64_MAX:
            _fail(
                "ValidationOverflow",
                f"tensor {name!r}: the element count of shape {shown_shape(shape)} "
                "overflows 64 bits",
                tensor=name,
            )
    return count


def _check_size_in_bits(name: str, dtype: str, shape: _Shape, count: int) -> int:
    """§5.6: the element count times the dtype's bits, in 64 bits; the size in bits."""
    bits = count * DTYPE_BITS[dtype]
    if bits > U64_MAX:
        shown = f"{dtype} x {shown_shape(shape)}"
        message = f"tensor {name!r}: the size in bits of {shown} overflows 64 bits"
        _fail("ValidationOverflow", message, tensor=name)
    return bits


def _check_whole_bytes(name: str, dtype: str, shape: _Shape, bits: int) -> None:
    """§5.7: a size in bits that is not whole bytes (only sub-byte dtypes) is misaligned."""
    if bits % 8:
        _fail(
            "MisalignedSlice",
            f"tensor {name!r}: {dtype} x {shown_shape(shape)} is {bits:,} bits, "
            "not a whole number of bytes",
            tensor=name,
        )


def _check_span(  # noqa: PLR0917 - the tensor's facts
    name: str, dtype: str, shape: _Shape, size: int, begin: int, end: int
) -> None:
    """§2.3, §5.8: the span of data_offsets is the tensor's size in bytes."""
    if end - begin != size:
        _fail(
            "TensorInvalidInfo",
            f"tensor {name!r}: dtype {dtype} and shape {shown_shape(shape)} need "
            f"{size:,} bytes, but data_offsets [{begin}, {end}] span {end - begin:,} bytes",
            tensor=name,
        )


def _fail(kind: str, message: str, **context: Any) -> NoReturn:
    """Raise the verdict (`context`: HeaderError's tensor, offset, needed, hint)."""
    raise HeaderError(kind, message, **context)
