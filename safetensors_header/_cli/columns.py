"""Columns fitted to a terminal: a table's widths, and cells cut so that no two read alike.

Layer: adapters (the command line). A name too wide for its column is cut where it still
reads as one tensor (a layer's number and the module's own name kept, `_dotted_cuts`), and
never so that two names of a column print the same (`distinct_cuts`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from .output import DIGITS, middle_cut

__all__ = ["columns", "distinct_cuts"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final

    from .output import Output

_NARROWEST: Final = 12  # a column cut to fit the terminal keeps at least this many characters
_MOST_PARTS: Final = 16  # a dotted name of more parts is cut as any text is
_NARROWEST_PART: Final = 4  # a module's own name is cut to no fewer characters than this


def _fitted(widths: list[int], shrinkable: Sequence[int], room: int) -> list[int]:
    """Column widths that fit `room` characters: the widest of `shrinkable` cut first.

    The cut columns end up equally wide (water-filling), so that a name column and a shard
    column share the room, rather than one keeping its width while the other is cut to
    nothing; none is cut below `_NARROWEST` characters.
    """
    gaps = 2 * (len(widths) - 1)
    fixed = sum(w for i, w in enumerate(widths) if i not in shrinkable) + gaps
    left = room - fixed
    wanted = sorted(widths[i] for i in shrinkable)
    if not wanted or sum(wanted) <= left:
        return widths  # nothing to cut (a line wider than a very narrow terminal wraps)
    cap = wanted[-1]
    for done, width in enumerate(wanted):
        share = left // (len(wanted) - done)
        if width > share:
            cap = share
            break
        left -= width
    cap = max(cap, _NARROWEST)
    return [min(w, cap) if i in shrinkable else w for i, w in enumerate(widths)]


def columns(
    out: Output,
    titles: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    *,
    right: tuple[int, ...] = (),
    shrink: tuple[int, ...] = (0,),
    styles: Sequence[str | None] | None = None,
) -> None:
    """Aligned columns of escaped cells; on a terminal the `shrink` columns are cut to fit,
    and each row is in its colour of `styles` (one a row, or None) where colour is on."""
    natural = [max(map(len, column)) for column in zip(titles, *rows, strict=True)]
    widths = _fitted(natural, shrink, out.width()) if out.tty and not out.wide else natural
    cut = [i for i, (w, n) in enumerate(zip(widths, natural, strict=True)) if w < n]
    lines: Iterable[tuple[str, ...]] = (titles, *rows)
    if cut:
        # Each cut column's cells as they are shown: different cells stay different.
        shown = {i: distinct_cuts([row[i] for row in rows], widths[i], out.ellipsis) for i in cut}
        lines = (
            titles,
            *(
                tuple(shown[i][number] if i in shown else cell for i, cell in enumerate(row))
                for number, row in enumerate(rows)
            ),
        )
    # One format for every row: str.format pads in C (a table can have 1,000,000 rows).
    template = "  ".join(
        f"{{:{'>' if index in right else '<'}{width}}}" for index, width in enumerate(widths)
    )
    if styles is not None and out.color:
        texts = [template.format(*row).rstrip() for row in lines]
        out.line(texts[0])
        for text, style in zip(texts[1:], styles, strict=True):
            out.painted((text, style))
        return
    out.lines(template.format(*row).rstrip() for row in lines)


def distinct_cuts(cells: Sequence[str], width: int, ellipsis: str) -> list[str]:
    """Each cell in `width` characters, and every cut cell still one cell's alone.

    A dotted name loses whole parts (`_dotted_cuts`: ``…layers.0…o_proj.weight``), the first
    such cut that, read with each ellipsis as any run of characters, matches no other cell
    with the same numbers and last part; else one run is cut in the middle (`_middle_cut`).
    A cut that still makes two cells look alike (the query and key weights of a layer,
    ``encoder.layer.0…y.weight``) is moved along the cell, else a second one is made, so
    that what tells the cell from the others stays in."""
    shown = list(cells)
    long = [number for number, cell in enumerate(cells) if len(cell) > width]
    kin: dict[tuple[str, ...], list[str]] = {}  # cells by their numbers and last part
    for cell in dict.fromkeys(cells):
        kin.setdefault(_kin(cell), []).append(cell)
    made: dict[str, str] = {}
    for number in long:
        cell = cells[number]
        if cell not in made:
            made[cell] = next(
                (cut for cut in _cuts(cell, width, ellipsis) if _alone(cut, cell, kin, ellipsis)),
                _cut(cell, width, ellipsis),
            )
        shown[number] = made[cell]
    owners: dict[str, set[str]] = {}
    for cell, text in zip(cells, shown, strict=True):
        owners.setdefault(text, set()).add(cell)
    clashing = {text for text, group in owners.items() if len(group) > 1}
    if not clashing:
        return shown
    taken = set(shown)
    moved: dict[str, str] = {}  # a clashing cell -> how it is shown (the same cell alike)
    for number, cell in enumerate(cells):
        if shown[number] not in clashing:
            continue
        if cell not in moved:
            others = owners[shown[number]] - {cell}
            moved[cell] = cell  # whole, wider than the room, rather than alike another
            for candidate in (
                *_cuts(cell, width, ellipsis),
                *_other_cuts(cell, others, width, ellipsis),
            ):
                if candidate not in taken:
                    taken.add(candidate)
                    moved[cell] = candidate
                    break
        shown[number] = moved[cell]
    return shown


def _kin(cell: str) -> tuple[str, ...]:
    """What a cut of `cell` keeps and other cells could share: its numbers, its last part."""
    return (*re.findall(DIGITS, cell), cell.rsplit(".", 1)[-1])


def _alone(cut: str, cell: str, kin: dict[tuple[str, ...], list[str]], ellipsis: str) -> bool:
    """Whether `cut` (each ellipsis any run of characters) matches no cell but `cell` among
    those of its kin."""
    others = kin[_kin(cell)]
    if len(others) == 1:
        return True
    pieces = cut.lstrip(" ").split(ellipsis)
    return not any(other != cell and _fits(pieces, other.lstrip(" ")) for other in others)


def _fits(pieces: list[str], text: str) -> bool:
    """Whether `text` is `pieces` with any run of characters between each two: the first
    at its start, the last at its end, the others in order (the leftmost place of each is
    as good as any)."""
    first, last = pieces[0], pieces[-1]
    if len(pieces) == 1:
        return text == first
    end = len(text) - len(last)
    if end < len(first) or not (text.startswith(first) and text.endswith(last)):
        return False
    at = len(first)
    for piece in pieces[1:-1]:
        found = text.find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _cut(cell: str, width: int, ellipsis: str) -> str:
    """`cell` in `width` characters: a dotted name by whole parts (`_dotted_cuts`) where it
    can be, else one run cut in the middle (`_middle_cut`); an indentation is kept."""
    text = cell.lstrip(" ")
    indent = cell[: len(cell) - len(text)]
    dotted = next(_cuts(cell, width, ellipsis), None)
    return dotted or indent + middle_cut(text, max(width - len(indent), 2), ellipsis)


def _cuts(cell: str, width: int, ellipsis: str) -> Iterator[str]:
    """`_dotted_cuts` of `cell`, its indentation kept."""
    text = cell.lstrip(" ")
    indent = cell[: len(cell) - len(text)]
    for shown in _dotted_cuts(text, width - len(indent), ellipsis):
        yield indent + shown


def _dotted_cuts(name: str, width: int, ellipsis: str) -> Iterator[str]:
    """`name`, a dotted module path, in `width` characters by leaving out whole parts, so that
    it still reads as one tensor: the module's own name and the parameter's (the last two
    parts, ``o_proj.weight``) and every number with the part before it (``layers.0``) are
    kept. The leading parts go first (``…layers.0.post_attention_layernorm.weight``); then one
    run in the middle as well, the most characters kept first (``…layers.0…o_proj.weight``).
    Nothing if no such cut fits."""
    parts = name.split(".")
    if len(name) <= width or len(parts) <= 2 or len(parts) > _MOST_PARTS:
        return
    kept = {len(parts) - 2, len(parts) - 1}
    for index, part in enumerate(parts):
        if part.isdigit():
            kept.update((index - 1, index))
    lead = 0  # the removable parts at the start
    while lead < len(parts) and lead not in kept:
        lead += 1
    for leading in range(1, lead + 1):
        shown = ellipsis + ".".join(parts[leading:])
        if len(shown) <= width:
            yield shown
            return
    # A run of removable parts in the middle too, the most characters kept first; then such
    # a run only cut short (``…layer.0.interm…dense.weight``), where leaving it out would
    # make the name read as another's too.
    runs, shortened = [], []
    for start in range(lead, len(parts)):
        stop = start
        while stop < len(parts) and stop not in kept:
            stop += 1
            head = ellipsis * (lead > 0) + ".".join(parts[lead:start])
            tail = ".".join(parts[stop:])
            runs.append(head + _gap(head, ellipsis) + tail)
            run = ".".join(parts[start:stop])
            room = width - len(head) - 1 - len(ellipsis) - len(tail)
            if 0 < room < len(run):
                shortened.append(f"{head}.{run[:room]}{ellipsis}{tail}")
    yield from sorted((r for r in runs if len(r) <= width), key=len, reverse=True)
    yield from sorted(shortened, key=len, reverse=True)
    # The fewest parts (a run of removable ones an ellipsis), the module's own name cut in its
    # middle: ``…layers.0.post…norm.weight``.
    head = ""
    for index, part in enumerate(parts[:-2]):
        if index in kept:
            head += part if not head or head.endswith(ellipsis) else "." + part
        elif not head.endswith(ellipsis):
            head += _gap(head, ellipsis)
    if head and not head.endswith(ellipsis):
        head += "."
    room = width - len(head) - len(parts[-1]) - 1
    if room >= _NARROWEST_PART:
        yield head + middle_cut(parts[-2], room, ellipsis) + "." + parts[-1]


def _gap(before: str, ellipsis: str) -> str:
    """The ellipsis for the parts left out after `before`: after a number, with the dot that
    ends it (``layer.1.…``: ``layer.1…`` could be layer 10's)."""
    return "." + ellipsis if before[-1:].isdigit() else ellipsis


def _other_cuts(cell: str, others: set[str], width: int, ellipsis: str) -> Iterator[str]:
    """Other ways to show `cell` in `width` characters, the likeliest to tell it from
    `others` first: the part where it differs from them kept whole, with its start up to its
    last number before that part (a layer's), and as much of its end as fits (one or two
    runs left out); then one run left out anywhere, nearest the middle first."""
    prefix = max(len(_common_prefix(cell, other)) for other in others)
    suffix = max(len(_common_prefix(cell[::-1], other[::-1])) for other in others)
    start, stop = prefix, max(prefix + 1, len(cell) - suffix)  # where it differs
    numbered = max((m.end() for m in re.compile(DIGITS).finditer(cell, 0, start)), default=0)
    for head in dict.fromkeys((numbered, width // 3, 0)):
        yield from _fitting(cell, [(0, head), (start, len(cell))], width, ellipsis)
        # Less of the differing part (its first character is what tells the cells apart),
        # and of the end what room is left.
        for part in dict.fromkeys((stop - start, 4, 1)):
            kept = [(0, head), (start, min(stop, start + part))]
            room = width - _shown_length(cell, kept, ellipsis) - len(ellipsis)
            if room > 0:
                yield from _fitting(cell, [*kept, (len(cell) - room, len(cell))], width, ellipsis)
    keep = max(width - len(ellipsis), 2)
    cut = len(cell) - keep
    centre = (keep + 1) // 2
    for at in sorted(range(1, keep), key=lambda at: abs(at - centre)):
        yield cell[:at] + ellipsis + cell[at + cut :]


def _fitting(cell: str, kept: list[tuple[int, int]], width: int, ellipsis: str) -> Iterator[str]:
    """`cell` with only the `kept` ranges shown (an ellipsis for each gap), if it fits."""
    if _shown_length(cell, kept, ellipsis) <= width:
        yield _shown_ranges(cell, kept, ellipsis)


def _merged(kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for start, stop in sorted(kept):
        if stop <= start:
            continue
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(stop, spans[-1][1]))
        else:
            spans.append((start, stop))
    return spans


def _shown_ranges(cell: str, kept: list[tuple[int, int]], ellipsis: str) -> str:
    spans = _merged(kept)
    parts = []
    at = 0
    for start, stop in spans:
        if start > at:
            parts.append(ellipsis)
        parts.append(cell[start:stop])
        at = stop
    if at < len(cell):
        parts.append(ellipsis)
    return "".join(parts)


def _shown_length(cell: str, kept: list[tuple[int, int]], ellipsis: str) -> int:
    return len(_shown_ranges(cell, kept, ellipsis))


def _common_prefix(a: str, b: str) -> str:
    """The characters `a` and `b` start with alike."""
    length = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        length += 1
    return a[:length]
