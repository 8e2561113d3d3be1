"""The json reader: json's C decoder, where that is provably what serde_json reads.

Layer: core (sans-IO). A fast reader of `READERS`: it applies no rule, and returns exactly
the columns that `rules.exact_columns` and `rules.validate_layout` would, or None.

It runs json's C scanner (set to stop at any float, NaN or Infinity), then checks, with
counts over the whole text and one loop over the entries, that nothing ``json.loads`` is
more lenient about than serde_json could have happened: no duplicate key dropped (json
keeps the last), no lone surrogate, no ``-0``, no bool where an integer must be. The counts
rest on two facts of the format, checked when this module is imported: each of the three
field names holds exactly one ``e`` (and no ``:`` or ``-``), and every dtype name is upper
case (no ``e``, ``:`` or ``-``).
"""

from __future__ import annotations

import json
import re
from functools import cache
from json.scanner import make_scanner

from .columns import (
    CANONICAL_DTYPE,
    JSON_WHITESPACE,
    SHORT_TAIL,
    WHITESPACE_RUN,
    Columns,
    Shape,
    chained,
    element_counts,
    sizes_hold,
    sort_by_offsets,
    tuple_new,
)
from .fileformat import DTYPES, METADATA_KEY, TENSOR_FIELDS

__all__ = ["json_columns"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final, NoReturn

# The counts' premises (see the module's docstring): a field or dtype name that ever broke
# them would make the proof wrong, so the import fails instead.
if any(field.count("e") != 1 or ":" in field or "-" in field for field in TENSOR_FIELDS):
    raise AssertionError(f"a field name breaks the json reader's counts: {TENSOR_FIELDS}")
if any(not name.isupper() or ":" in name or "-" in name for name in DTYPES):
    raise AssertionError("a dtype name breaks the json reader's counts (upper case, no ':' '-')")

# \u escapes json.loads would read differently from serde_json, or that would defeat the
# json reader's counting: of printable ASCII (could spell a key such as "dtype", or a ':' or
# '-' it counts) and of surrogates (Python accepts lone ones).
_RISKY_ESCAPE: Final = re.compile(r"\\u(?:00[2-7]|[dD][89a-fA-F])")


def json_columns(text: str) -> Columns | None:
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
        text[scanned:].strip(JSON_WHITESPACE)
        if tail <= SHORT_TAIL
        else WHITESPACE_RUN.match(text, scanned).end() != len(text)  # type: ignore[union-attr]
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
    shapes: list[Shape] = []
    begins: list[int] = []
    ends: list[int] = []
    distinct: dict[Shape, Shape] = {}  # one tuple per distinct shape (a checkpoint has few)
    for entry in top.values():
        # Only objects of exactly dtype, shape and data_offsets get through: a list entry
        # (array form) raises TypeError, a missing field KeyError, a map-form dtype
        # TypeError (unhashable), an unknown dtype KeyError, offsets that are not a pair
        # ValueError (or TypeError), a shape holding an array or object TypeError
        # (unhashable). No entry has a fourth key: the ':' count allowed three per entry.
        try:
            dtype = CANONICAL_DTYPE[entry["dtype"]]
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
    # equal integers and the distinct ones tell the types of all (`element_counts` checks
    # them). No negative number is in the text; offsets too large are caught by the layout
    # check (last end bounded).
    columns = tuple_new(Columns, (names, dtypes, shapes, begins, ends, metadata))
    if not names:
        return columns
    if not chained(begins, ends):
        columns = sort_by_offsets(columns)
        if not chained(columns.begins, columns.ends):
            return None
    # Chained with every size matching means every end >= begin: the rows are in the
    # reference's order, and its walk would pass them.
    return columns if sizes_hold(columns, element_counts(distinct)) else None


def _e_accounted_for(text: str, expected: int) -> bool:
    """Whether the text's 'e's are the `expected` ones in strings plus \\u escapes' hex digits.

    The hex digits are counted only when there are more 'e's than expected (a regex pass):
    Python's json.dumps writes "é" as \\u00e9.
    """
    found = text.count("e")
    return found == expected or (
        "\\" in text and found == expected + "".join(_u_escape().findall(text)).count("e")
    )


@cache
def _u_escape() -> re.Pattern[str]:
    """Escapes, matched left to right, so that an escaped backslash before "u00e9" (\\u00e9
    in the text) does not start one; JSON has no backslash outside strings. (Compiled on
    first use: a cheap import.)"""
    return re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)")


def _no_float(token: str) -> NoReturn:
    raise ValueError(f"{token} is not an integer")


# The fast path reads integers only: any float, NaN or Infinity hands the text to the exact path.
_fast_scan: Final = make_scanner(
    json.JSONDecoder(parse_float=_no_float, parse_constant=_no_float)  # type: ignore[arg-type]
)
