"""What the readers share: the columns a header is read into, and shortcuts of the layout.

Layer: core (sans-IO). Every reader of the JSON turns a header's text into `Columns` (a row a
tensor, in the order of the data). The layout rules' common case (`chained`, `sizes_hold`,
`element_counts`, `sort_by_offsets`) lets the walk (`rules.validate_layout`) and the fast
readers prove a layout without walking it; and the fast readers' lexical pieces are here.
"""

from __future__ import annotations

import json
import re
import sys
from collections import namedtuple
from json.scanner import make_scanner
from operator import itemgetter

from .fileformat import DTYPE_BITS, U64_MAX

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Final, NamedTuple

    class Columns(NamedTuple):
        """A header read: one row per tensor (after "last wins"), and the metadata."""

        names: list[str]
        dtypes: list[str]
        shapes: list[Shape]
        begins: list[int]  # relative to the data buffer, as the header writes them
        ends: list[int]
        metadata: dict[str, str] | None

else:
    # The same, without importing typing: a tuple whose fields are read by name at C speed.
    Columns = namedtuple("Columns", "names dtypes shapes begins ends metadata")

#: ``tuple_new(Columns, (names, dtypes, ...))`` makes `Columns` in half the time of calling it
#: (the fast readers' last step, a tenth of a microsecond of a small header's few).
tuple_new: Final = tuple.__new__

__all__ = ["CANONICAL_DTYPE", "DIGITS", "JSON_WHITESPACE", "POSSESSIVE"]
__all__ += ["SHORT_TAIL", "SUB_BYTE_DTYPES", "UINT", "UINT_LIST", "WHITESPACE_RUN", "Columns"]
__all__ += ["Entry", "Shape", "bits_of", "bytes_per_element", "chained", "element_counts"]
__all__ += ["has_control_character", "in_order", "scan", "sizes_hold", "sort_by_offsets"]
__all__ += ["tuple_new"]

CANONICAL_DTYPE: Final = {name: name for name in DTYPE_BITS}  # to keep one object per dtype
bits_of = DTYPE_BITS.__getitem__
SUB_BYTE_DTYPES: Final = frozenset(name for name, bits in DTYPE_BITS.items() if bits % 8)
bytes_per_element = {name: bits // 8 for name, bits in DTYPE_BITS.items()}.__getitem__
Shape = tuple[int, ...]
Entry = tuple[str, list[int], int, int]  # a tensor entry read: dtype, shape, begin, end
JSON_WHITESPACE: Final = " \t\r\n"
WHITESPACE_RUN: Final = re.compile("[ \t\r\n]*")  # json's own: scans without copying
SHORT_TAIL: Final = 64  # characters after a JSON value checked by str.strip, not the pattern
# Raw U+0000-U+001F are never allowed in a string: each such byte to 0, any other to 1.
_CONTROL_TO_ZERO: Final = bytes(0 if byte < 0x20 else 1 for byte in range(256))
# Numbers of 1 to 20 digits; the scan that reads them rejects a leading zero. Possessive
# repeats (Python 3.11+) never backtrack: faster.
POSSESSIVE: Final = "+" if sys.version_info >= (3, 11) else ""
DIGITS: Final = "[0-9]{1,20}" + POSSESSIVE
UINT: Final = "(?:0|[1-9][0-9]{0,19})"  # a JSON integer of at most 20 digits, no sign
UINT_LIST: Final = f"(?:{UINT}(?:,{UINT})*)?"
# json's C scanner itself, without json.loads' checks of a text already checked here.
scan: Final = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed: a class


def chained(begins: list[int], ends: list[int]) -> bool:
    """The first tensor begins at 0 and each next one where the previous one ends."""
    return begins[0] == 0 and begins[1:] == ends[:-1]


def element_counts(distinct: Iterable[Shape]) -> dict[Shape, int] | None:
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


def sizes_hold(columns: Columns, count_of: dict[Shape, int] | None) -> bool:
    """Whether chained rows pass the rest of the reference's walk: every row's span is
    exactly its elements x its dtype's size.

    `count_of`: each distinct shape's element count (None: they cannot decide, see
    `element_counts`).
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
        total += count_of[shape] * bits_of(dtype)
        if total != end << 3:
            return False
    return True


def sort_by_offsets(columns: Columns) -> Columns:
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
    return Columns(
        list(pick(names)),
        list(pick(dtypes)),
        list(pick(shapes)),
        list(pick(begins)),
        list(pick(ends)),
        metadata,
    )


def in_order(columns: Columns, count_of: dict[Shape, int] | None) -> Columns | None:
    """The columns in the reference's order, if its walk passes them all; else None.

    `count_of`: each distinct shape's element count (None: the counts cannot decide, see
    `element_counts`).
    """
    if count_of is None:
        return None
    if not chained(columns.begins, columns.ends):
        columns = sort_by_offsets(columns)
        if not chained(columns.begins, columns.ends):
            return None
    return columns if sizes_hold(columns, count_of) else None


def has_control_character(strings: str) -> bool:
    # Each byte to 0 if a control character, 1 else, then one memchr for a 0: cheaper than
    # deleting them and comparing lengths (a translation that deletes builds a table a call;
    # a 100-tensor header parsed in 1,066,000 instructions against 1,114,000). UTF-8 puts
    # no byte below 0x20 in another character.
    return b"\0" in strings.encode().translate(_CONTROL_TO_ZERO)
