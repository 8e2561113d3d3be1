"""The canonical reader: the form writers produce, read at C speed, no object per tensor.

Layer: core (sans-IO). A fast reader of `READERS`: it applies no rule, and returns exactly
the columns that `rules.exact_columns` and `rules.validate_layout` would, or None.

The form: no backslash anywhere; an object of an optional ``__metadata__`` first (an object
of strings, ``{}`` or ``null``) and then tensor entries, each an object of exactly ``dtype``
(a string), ``shape`` and ``data_offsets`` (arrays of integers), in one order of those
fields shared by all entries; any JSON whitespace between tokens.

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
4. The names are distinct and none is ``__metadata__``: no duplicate key at the top level,
   where serde keeps the last and json the last too, but the layout check would see only
   one. Keys repeated inside ``__metadata__`` keep the last value in both.
5. Every number is an integer in 0..2^64-1, which serde reads as a u64 (not a float);
   dtypes are looked up in the table of the 22 names. Offsets in the order of the data
   (the usual file) are instead compared, as text, with the layout the sizes chain into
   (`chained_ends`), which proves them and the layout at once.

Anything else, and every document that is not valid, returns None: the json and exact
readers decide it, with their messages.
"""

from __future__ import annotations

import re
from functools import cache
from itertools import accumulate, repeat
from operator import mul

from .columns import (
    CANONICAL_DTYPE,
    DIGITS,
    JSON_WHITESPACE,
    POSSESSIVE,
    SUB_BYTE_DTYPES,
    UINT_LIST,
    Columns,
    Shape,
    bytes_per_element,
    element_counts,
    has_control_character,
    in_order,
    scan,
    tuple_new,
)
from .fileformat import METADATA_KEY, TENSOR_FIELDS, U64_MAX

__all__ = ["canonical_columns", "canonical_shapes"]
__all__ += ["chained_ends", "metadata_member"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final

# The patterns are compiled on first use: compiling every pattern of the parser at import
# took about a millisecond, a tenth of the import, paid by every command-line call.


@cache
def _word_gap() -> re.Pattern[str]:
    """Whitespace between two word characters, which would split a number or `null` in two:
    removing it would join two tokens into one."""
    return re.compile("[0-9A-Za-z_][ \t\r\n]+[0-9A-Za-z_]")


@cache
def _shape_lists() -> re.Pattern[str]:
    """The insides of the distinct shapes, joined by "],["."""
    return re.compile(rf"{UINT_LIST}(?:\],\[{UINT_LIST})*")


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


def canonical_columns(text: str) -> Columns | None:
    """The columns of a text in the form writers produce; else None (see the module's
    docstring for the form, and the proof)."""
    if "\\" in text:
        return None
    parts = text.split('"')
    if len(parts) < 3:
        return None
    parts[0] = parts[0].lstrip(JSON_WHITESPACE)
    parts[-1] = parts[-1].rstrip(JSON_WHITESPACE)
    last = parts[-1]
    columns = _template_columns(parts)
    if columns is None:
        parts[-1] = last  # as split (the attempt rewrote its end)
        if _without_whitespace(parts):
            columns = _template_columns(parts)
    return columns


def metadata_member(parts: list[str]) -> tuple[int, dict[str, str] | None]:
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
        metadata, first = canonical_metadata(parts)
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
    if any(space in cleaned for space in JSON_WHITESPACE):
        if _word_gap().search(cleaned):
            return False
        for space in JSON_WHITESPACE:
            cleaned = cleaned.replace(space, "")
    elif cleaned is outside:
        return False
    parts[0::2] = cleaned.split('"')
    return True


def _template_columns(parts: list[str]) -> Columns | None:
    """`canonical_columns` on the parts between quotes (the last one it rewrites)."""
    last = parts[-1]
    # The text ends with the last entry's (or the metadata's) '}' and the top level's '}';
    # written as "}," like every other entry's end, all entries have the same parts.
    if parts[0] != "{" or not last.endswith("}}"):
        return None
    parts[-1] = last[:-1] + ","
    count = len(parts)
    first, metadata = metadata_member(parts)
    if not first or has_control_character('"'.join(parts[3 : first - 1 : 2])):
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
    if has_control_character('"'.join(names)):
        return None  # a raw control character
    try:
        dtypes = list(map(CANONICAL_DTYPE.__getitem__, parts[first + dtype_at :: _ENTRY_PARTS]))
    except KeyError:
        return None
    last_field = order[-1]
    shaped = canonical_shapes(
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
    ends = chained_ends(dtypes, counts, joined, (":[", closing + '":[', closing))
    if ends is not None:
        return tuple_new(Columns, (names, dtypes, shapes, [0, *ends[:-1]], ends, metadata))
    offsets = _canonical_offsets(joined, separator)
    if offsets is None:
        return None
    return in_order(
        tuple_new(Columns, (names, dtypes, shapes, offsets[0::2], offsets[1::2], metadata)),
        count_of,
    )


def canonical_metadata(parts: list[str]) -> tuple[dict[str, str] | None, int]:
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


def canonical_shapes(
    column: list[str], separator: str | None = None
) -> tuple[list[Shape], list[int] | None, dict[Shape, int] | None] | None:
    """A column of shapes as tuples, each distinct one parsed once; None if not so.

    The column holds a shape's insides (``2,3``), or with `separator` a ``:[2,3]`` part and
    the separator after it. Also the element count of each row and of each distinct shape
    (see `element_counts`; both None when the counts cannot decide). Rows are looked up by
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
    if not _shape_lists().fullmatch(joined):
        return None
    parsed = list(map(tuple, scan(f"[[{joined}]]", 0)[0]))
    if len(parsed) != len(distinct):
        return None  # a part held "],[": more lists than parts
    if max(map(max, filter(None, parsed)), default=0) > U64_MAX:
        return None  # a u64 is at most 20 digits, not every 20 digits are a u64
    shapes = list(map(dict(zip(distinct, parsed, strict=True)).__getitem__, column))
    count_of = element_counts(parsed)
    if count_of is None:
        return shapes, None, None
    counts = dict(zip(distinct, map(count_of.__getitem__, parsed), strict=True))
    return shapes, list(map(counts.__getitem__, column)), count_of


@cache
def _offset_parts(separator: str) -> re.Pattern[str]:
    """Each part of an offsets column followed by a '"' (which no part holds, so that a
    repetition of the pattern is exactly one part)."""
    return re.compile(rf'(?::\[{DIGITS},{DIGITS}\]{re.escape(separator)}")*{POSSESSIVE}')


_SPACES_FOR_MARKUP: Final = str.maketrans(':[]}"', "     ")  # all that is not a number or ','


def _canonical_offsets(joined: str, separator: str) -> list[int] | None:
    """The ``:[begin,end]`` parts (joined with '"') as one flat list of integers; None if not
    so."""
    # A pattern ending in '"' with no other '"' matches part by part.
    if not _offset_parts(separator).fullmatch(joined + '"'):
        return None
    # ':[0,8]},":[8,32]},' -> "  0,8  ,   8,32  ": one scan of a JSON array of integers,
    # which rejects a leading zero (serde_json does too, and the json reader decides).
    inner = joined.translate(_SPACES_FOR_MARKUP)[:-1]
    try:
        values: list[int] = scan(f"[{inner}]", 0)[0]
    except ValueError:
        return None
    return values


def chained_ends(
    dtypes: list[str], counts: list[int] | None, joined: str, form: tuple[str, str, str]
) -> list[int] | None:
    """The rows' ends when their offsets are exactly the layout their sizes chain into; else
    None (the offsets are then read and checked as they are).

    `joined` is the rows' offsets text in a `form` (opening, between, closing): the opening,
    then ``B,E`` per row, joined by the between, then the closing. `counts` are the rows'
    element counts (None: see `element_counts`).

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
    if not SUB_BYTE_DTYPES.isdisjoint(dtypes):
        return None  # sizes in bits: `sizes_hold` checks those
    ends = list(accumulate(map(mul, counts, map(bytes_per_element, dtypes))))
    if ends[-1] > U64_MAX >> 3:
        return None
    texts = list(map(str, ends))
    rows = len(texts)
    items = [between] * (4 * rows - 1)  # B "," E between B "," E ... E
    items[0::4] = ["0", *texts[:-1]]
    items[1::4] = [","] * rows
    items[2::4] = texts
    return ends if joined == opening + "".join(items) + closing else None
