"""A read plan's requests made: straight into the tensors' buffers, or, where a request holds
many small runs (a split along a later axis: a run per row), through a small staging buffer
and one strided copy per tensor.

Layer: services (on the data path; used by `_plan`).

A strided part of a tensor (a `Runs`: equal runs a stride apart) is never cut into a view per
row. A request that holds several of its rows is read whole into a staging buffer (requests
of that kind are planned at most `STAGE_PART` bytes long), and the rows it holds are copied
into the tensor's buffer at once: by numpy or torch where the process has imported either (a
strided view, one copy), else by joining the rows' slices. At most `_STAGE_BUDGET` bytes of
such requests are in flight a file, their buffer used again batch after batch: the memory
beyond the tensors' is that, not the whole rows read.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from operator import itemgetter

from ._fetch import SafetensorsFile, read_planned
from ._runs import Runs
from ._sources.planning import allocate, with_segments

__all__ = ["OFFSET", "STAGE_BELOW", "STAGE_PART", "execute"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Final

    from ._sources.options import Clock
    from ._sources.planning import Read, Segment

#: A request whose runs average less than this is staged: a memory copy of its bytes costs
#: far less than a socket read (or a system call) per run.
#: A segment's (or a read's) file offset: what segments are sorted by.
OFFSET: Final = itemgetter(0)
STAGE_BELOW: Final = 64 << 10
#: The longest staged request a plan makes (`_plan.plan_reads` cuts them so): a few of them
#: in flight keep a loopback link busy, and their buffer stays small beside the tensors.
STAGE_PART: Final = 4 << 20
# Staged bytes in flight a file: as many staged requests at once as the streams of a read.
_STAGE_BUDGET: Final = 4 * STAGE_PART

#: A strided part of a tensor and where it lands: its runs, and its buffer.
Strided = tuple[Runs, memoryview]


def execute(
    file: SafetensorsFile,
    spans: Sequence[tuple[int, int]],
    segments: list[Segment],
    strided: list[Strided],
    clock: Clock,
) -> None:
    """Make a file's requests (`spans`, sorted): each byte of `segments` (sorted ``(file
    offset, view)`` pairs) and of the `strided` parts (sorted, each a `Runs` of several
    runs and its tensor's buffer) read once, into its place."""
    reads = with_segments(spans, segments)
    starts = [runs.start for runs, _ in strided]
    direct: list[Read] = []
    staged: list[tuple[Read, list[tuple[int, int, int, Strided]]]] = []
    for start, stop, planned in reads:
        rows, pieces = _rows_inside(strided, starts, start, stop)
        inside = planned + pieces  # (a row cut by a part's end: at most two a tensor)
        count = len(inside) + sum(last - first + 1 for _, first, last, _ in rows)
        asked = sum(len(view) for _, view in inside) + sum(
            (last - first + 1) * part[0].length for _, first, last, part in rows
        )
        if count > 1 and asked < STAGE_BELOW * count:
            staged.append(((start, stop, sorted(inside, key=OFFSET)), rows))
        else:  # a run or a few long ones: straight into their buffers
            for _, first, last, (runs, target) in rows:
                length, stride = runs.length, runs.stride
                inside += [
                    (runs.start + row * stride, target[row * length : (row + 1) * length])
                    for row in range(first, last + 1)
                ]
            direct.append((start, stop, sorted(inside, key=OFFSET)))
    read_planned(file, direct, clock)
    if not staged:
        return
    budget = max(_STAGE_BUDGET, *(stop - start for (start, stop, _), _ in staged))
    stage = allocate(budget)
    batch: list[tuple[Read, list[tuple[int, int, int, Strided]]]] = []
    held = 0
    for item in staged:
        length = item[0][1] - item[0][0]
        if held + length > budget:
            _staged(file, batch, stage, clock)
            batch, held = [], 0
        batch.append(item)
        held += length
    _staged(file, batch, stage, clock)


def _rows_inside(
    strided: list[Strided], starts: list[int], start: int, stop: int
) -> tuple[list[tuple[int, int, int, Strided]], list[Segment]]:
    """The strided rows in ``[start, stop)``: ``(whole rows from, first, last, part)`` with
    ``first..last`` the rows wholly inside; and the pieces of rows cut by the request's ends,
    as segments (a part of the plan's request cutting a long run into parts)."""
    rows: list[tuple[int, int, int, Strided]] = []
    pieces: list[Segment] = []
    at = max(0, bisect_right(starts, start) - 1)
    while at < len(strided) and starts[at] < stop:
        part = strided[at]
        runs, target = part
        at += 1
        first_byte, length, stride, number = runs.start, runs.length, runs.stride, runs.number
        end = first_byte + (number - 1) * stride + length
        if end <= start:
            continue
        # Rows that touch the request, then those wholly inside it.
        low = max(0, -(-(start - first_byte - length + 1) // stride))
        high = min(number - 1, (stop - 1 - first_byte) // stride)
        if low > high:
            continue
        first = low if first_byte + low * stride >= start else low + 1
        last = high if first_byte + high * stride + length <= stop else high - 1
        if first <= last:
            rows.append((first_byte + first * stride, first, last, part))
        for row in {low, high}:  # the rows cut by the request's ends
            if first <= row <= last:
                continue
            row_start = first_byte + row * stride
            lower, upper = max(start, row_start), min(stop, row_start + length)
            if lower < upper:
                at_row = row * length + lower - row_start
                pieces.append((lower, target[at_row : at_row + upper - lower]))
    return rows, pieces


def _staged(
    file: SafetensorsFile,
    batch: list[tuple[Read, list[tuple[int, int, int, Strided]]]],
    stage: memoryview,
    clock: Clock,
) -> None:
    """A batch of staged requests read into `stage` at once, then copied out of it."""
    reads, places, at = [], [], 0
    for (start, stop, _), _rows in batch:
        places.append(at)
        reads.append((start, stop, [(start, stage[at : at + stop - start])]))
        at += stop - start
    read_planned(file, reads, clock)
    for ((start, stop, inside), rows), place in zip(batch, places, strict=True):
        held = stage[place : place + stop - start]
        for offset, view in inside:
            view[:] = held[offset - start : offset - start + len(view)]
        for offset, first, last, (runs, target) in rows:
            count, length = last - first + 1, runs.length
            copy_rows(
                target[first * length : (last + 1) * length],
                held,
                offset - start,
                length,
                runs.stride,
                count,
            )


def copy_rows(  # noqa: PLR0917 - a strided copy's geometry
    target: memoryview, source: memoryview, offset: int, length: int, stride: int, count: int
) -> None:
    """``count`` runs of ``length`` bytes of `source`, the first at `offset`, each `stride`
    bytes after the one before, into `target` one after another: one strided copy by numpy
    or torch where the process has imported either, else the rows' slices joined."""
    if count == 1 or stride == length:
        target[:] = source[offset : offset + count * length]
        return
    extent = (count - 1) * stride + length
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        rows = numpy.frombuffer(source, numpy.uint8, extent, offset)
        strided = numpy.lib.stride_tricks.as_strided(
            rows, (count, length), (stride, 1), writeable=False
        )
        numpy.copyto(numpy.frombuffer(target, numpy.uint8).reshape(count, length), strided)
        return
    torch = sys.modules.get("torch")
    if torch is not None:
        rows = torch.frombuffer(source, dtype=torch.uint8, count=extent, offset=offset)
        into = torch.frombuffer(target, dtype=torch.uint8).view(count, length)
        into.copy_(rows.as_strided((count, length), (stride, 1)))
        return
    target[:] = b"".join(
        [source[at : at + length] for at in range(offset, offset + count * stride, stride)]
    )
