"""The compact reader: the reference's compact form, 2 MiB and more, 4 strings a tensor.

Layer: core (sans-IO). A fast reader of `READERS`: it applies no rule, and returns exactly
the columns that `rules.exact_columns` and `rules.validate_layout` would, or None.

The form: ``{`` then an optional ``"__metadata__":...,`` member, then entries
``"NAME":{"dtype":"DT","shape":[S],"data_offsets":[B,E]}`` joined by ``,``, then ``}``; no
whitespace but after it, no backslash.

Why what it accepts is exactly that document (and so what serde_json and serde read):

1. Each constant stretch of an entry (``":{"dtype":"``, ``","shape":[``,
   ``],"data_offsets":[`` and ``]},"`` between entries) is replaced by one of the
   characters U+0001-U+0004, which the text does not hold (checked): the marked text maps
   back to the text by putting the stretches back.
2. Every byte below 0x20 of the marked text's UTF-8 is a mark (UTF-8 encodes no letter with
   such a byte), in the order 1, 2, 3, 4, 1, 2, 3, 4, ..., 1, 2, 3: so the text holds no
   raw control character at all, and its entries' stretches are in order.
3. The last '"' ends the head; the rest has no '"' and ends with ``]}}``. The head, a '"'
   put back, is ``{"`` or a metadata member read as the canonical reader reads it (no mark
   in it: the rest holds all of them). The rest is cut at the marks into 4 pieces per
   entry: its name, dtype, shape and offsets, none of which holds a '"'.
4. Names are distinct and none is ``__metadata__``; dtypes are among the 22; shapes are
   lists of integers of at most 20 digits, with no leading zero; offsets are two such
   integers. So the text is that document, which is valid JSON; numbers are checked to be
   at most 2^64-1 (shapes here, offsets by the layout check), so serde reads each as a
   u64. (Offsets in the order of the data are checked instead by writing the layout the
   sizes chain into and comparing texts: `canonical.chained_ends`.)

Below 2 MiB the canonical reader reads this form faster (measured: it makes 10 strings per
tensor to this reader's 4, but four replaces cost about a nanosecond a byte).
"""

from __future__ import annotations

import re
from functools import cache

from . import canonical
from .canonical import canonical_shapes, metadata_member
from .columns import (
    CANONICAL_DTYPE,
    DIGITS,
    JSON_WHITESPACE,
    POSSESSIVE,
    Columns,
    in_order,
    scan,
    tuple_new,
)
from .fileformat import METADATA_KEY

__all__ = [
    "SMALLEST",
    "compact_columns",
]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final

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
#: Characters from which this reader is tried: below, the canonical reader reads the compact
#: form faster (see the module's docstring).
SMALLEST: Final = 2 * 2**20
_PIECES: Final = ("", '"', "")  # the offsets' form for `chained_ends`: "B,E" joined by '"'


@cache
def _offset_pairs() -> re.Pattern[str]:
    """The offsets column, pair by pair (compiled on first use: a cheap import)."""
    return re.compile(rf'(?:{DIGITS},{DIGITS}")*{POSSESSIVE}')


def compact_columns(text: str) -> Columns | None:
    """The columns of a text in the compact form; else None (see the module's docstring for
    the form, and the proof)."""
    if "\\" in text or _MARKS[0][0] not in text:
        return None  # (the usual text that is not in the compact form leaves here)
    text = text.rstrip(JSON_WHITESPACE)
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
        dtypes = list(map(CANONICAL_DTYPE.__getitem__, pieces[1::4]))
    except KeyError:
        return None
    shaped = canonical_shapes(pieces[2::4])
    if shaped is None:
        return None
    shapes, counts, count_of = shaped
    # "B,E" pieces joined with '"', which none holds.
    offsets = '"'.join(pieces[3::4])
    ends = canonical.chained_ends(dtypes, counts, offsets, _PIECES)
    if ends is not None:
        return tuple_new(Columns, (names, dtypes, shapes, [0, *ends[:-1]], ends, metadata))
    if not _offset_pairs().fullmatch(offsets + '"'):  # matches piece by piece
        return None
    try:  # one scan of a JSON array, which rejects a leading zero
        values: list[int] = scan("[" + offsets.replace('"', ",") + "]", 0)[0]
    except ValueError:
        return None
    columns = tuple_new(Columns, (names, dtypes, shapes, values[0::2], values[1::2], metadata))
    return in_order(columns, count_of)


def _compact_head(head: str) -> tuple[bool, dict[str, str] | None]:
    """Whether a compact head (``{`` or ``{"__metadata__":...,``) is one; its metadata."""
    parts = head.split('"')
    if parts[0] != "{":
        return False, None
    first, metadata = metadata_member(parts)  # (the marks' order rules out control characters)
    return first == len(parts), metadata
