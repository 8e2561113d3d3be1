"""A read plan's runs and requests held as blocks of equal runs a stride apart, and the
joining of their gaps.

Layer: services (on the data path; used by `_plan`).

A split along a later axis asks a run per row: equal runs, a stride apart. They are held as
one `Runs` (four numbers, however many rows), and the requests made of them as one entry of
`Requests`; the gaps between a block's runs are equal, so they are joined many at a time
(`joined_blocks`): a plan costs in its tensors and blocks, not in its rows.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from collections.abc import Sequence

from ._sources.planning import part_length, streams

__all__ = ["Requests", "Runs", "blocks_of", "crowded", "joined_blocks", "request_blocks", "shown"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any, TypeAlias

    #: Equal runs a stride apart: ``[start, length, stride, count]`` (``count`` runs of
    #: ``length`` bytes, the first at ``start``, each ``stride`` bytes after the one before).
    Block: TypeAlias = list[int]


class Runs(Sequence[tuple[int, int]]):
    """``(offset, length)`` pairs of `number` runs of `length` bytes, each `stride` bytes
    after the one before: a tensor's part split along a later axis (a run per row), held
    as four numbers however many rows it has.

    A sequence like the tuple of its pairs, and equal to it.
    """

    __slots__ = ("length", "number", "start", "stride")

    start: int
    length: int
    stride: int
    number: int

    def __init__(self, start: int, length: int, stride: int, number: int) -> None:
        for field, value in zip(Runs.__slots__, (length, number, start, stride), strict=True):
            object.__setattr__(self, field, operator.index(value))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Runs are immutable: cannot assign to {name!r}")

    def __len__(self) -> int:
        return self.number

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self.number
        if not 0 <= index < self.number:
            raise IndexError("Runs index out of range")
        return (self.start + index * self.stride, self.length)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        start, length, stride = self.start, self.length, self.stride
        return ((start + i * stride, length) for i in range(self.number))

    @property
    def nbytes(self) -> int:
        """The bytes of all the runs."""
        return self.length * self.number

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Runs):
            if self.number != other.number:
                return False
            return self.number == 0 or (
                (self.start, self.length) == (other.start, other.length)
                and (self.number == 1 or self.stride == other.stride)
            )
        if isinstance(other, tuple):
            return len(other) == self.number and tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return (
            f"Runs(start={self.start}, length={self.length}, stride={self.stride}, "
            f"number={self.number})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (Runs, (self.start, self.length, self.stride, self.number))


class Requests(Sequence[tuple[str | None, int, int]]):
    """``(file, start, stop)`` of every request of a `ReadPlan`, held as runs of equal
    requests a stride apart (the rows of a split no gap joins are as many requests, but one
    entry here): a sequence like the tuple of its triples, and equal to it.
    """

    __slots__ = ("_blocks", "_ends")

    def __init__(self, blocks: Iterable[tuple[str | None, int, int, int, int]]) -> None:
        # (file, start, length, stride, count): `count` requests of `length` bytes (> 0),
        # each `stride` (> 0) after the one before.
        self._blocks = tuple(block for block in blocks if block[4])
        ends, total = [], 0
        for block in self._blocks:
            total += block[4]
            ends.append(total)
        self._ends = ends

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("Requests index out of range")
        from bisect import bisect_right

        at = bisect_right(self._ends, index)
        file, start, length, stride, count = self._blocks[at]
        first = start + (index - self._ends[at] + count) * stride
        return (file, first, first + length)

    def __iter__(self) -> Iterator[tuple[str | None, int, int]]:
        for file, start, length, stride, count in self._blocks:
            for first in range(start, start + count * stride, stride):
                yield (file, first, first + length)

    def per_file(self) -> dict[str | None, tuple[int, int]]:
        """File name -> (the requests made to it, the bytes they read)."""
        out: dict[str | None, tuple[int, int]] = {}
        for file, _, length, _, count in self._blocks:
            requests, read = out.get(file, (0, 0))
            out[file] = (requests + count, read + length * count)
        return out

    def spans(self, file: str | None) -> list[tuple[int, int]]:
        """``[start, stop)`` of the requests to `file`, in order."""
        return [
            (first, first + length)
            for name, start, length, stride, count in self._blocks
            if name == file
            for first in range(start, start + count * stride, stride)
        ]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Requests, tuple)):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"<Requests {len(self):,} in {len(self._blocks):,} runs>"

    def __reduce__(self) -> tuple[object, ...]:
        return (Requests, (self._blocks,))


def blocks_of(ranges: Sequence[tuple[int, int]]) -> list[Block]:
    """The non-empty ranges, sorted, as blocks of equal runs a stride apart."""
    if isinstance(ranges, Runs):
        return [[ranges.start, ranges.length, ranges.stride, ranges.number]] if ranges else []
    blocks: list[Block] = []
    for offset, length in sorted(ranges):
        if not length:
            continue
        if blocks:
            last = blocks[-1]
            if length == last[1]:
                if last[3] == 1:
                    last[2], last[3] = offset - last[0], 2
                    continue
                if offset == last[0] + last[3] * last[2]:
                    last[3] += 1
                    continue
        blocks.append([offset, length, length, 1])
    return blocks


def joined_blocks(
    blocks: list[Block],
    joinable: int,
    max_over_read: float | None,
    max_requests: int | None,
    name: str | None,
) -> list[Block]:
    """The sorted runs of `blocks` with gaps joined, smallest first (the first of equal
    gaps first): those up to `joinable` bytes, then down to `max_requests` spans, all
    within `max_over_read`. Equal gaps (those between the runs of a block) are joined as
    many at a time: the cost is in blocks and spans made, not in runs."""
    runs = sum(block[3] for block in blocks)
    if runs < 2:
        return blocks
    asked = sum(block[1] * block[3] for block in blocks)
    budget = float("inf") if max_over_read is None else max_over_read * asked
    # (gap, index of its first, how many, where): the gaps between a block's runs
    # (where >= 0: that block), then the one after it (where < 0: ~block).
    gaps: list[tuple[int, int, int, int]] = []
    index = 0
    for at, (start, length, stride, count) in enumerate(blocks):
        if count > 1:
            gaps.append((stride - length, index, count - 1, at))
            index += count - 1
        if at + 1 < len(blocks):
            end = start + (count - 1) * stride + length
            gaps.append((max(blocks[at + 1][0] - end, 0), index, 1, ~at))
            index += 1
    gaps.sort()
    inside = [0] * len(blocks)  # of each block's inner gaps, the first `inside` joined
    after = [False] * len(blocks)
    left, extra = runs, 0
    for gap, _, many, where in gaps:
        too_many = max_requests is not None and left > max_requests
        if gap > joinable and not too_many:
            break
        wanted = many if gap <= joinable or max_requests is None else min(many, left - max_requests)
        fit = (
            wanted
            if not gap or extra + wanted * gap <= budget
            else _joined_within(extra, gap, budget)
        )
        if fit:
            if where >= 0:
                inside[where] = fit
            else:
                after[~where] = True
            extra += fit * gap
            left -= fit
        if fit < wanted:  # the next gap would read more than max_over_read allows
            if max_requests is None or left <= max_requests:
                break
            merged = runs - sum(many for size, _, many, _ in gaps if not size)
            raise ValueError(
                f"{shown(name)}: {merged:,} runs cannot be joined into "
                f"max_requests={max_requests:,} requests without reading "
                f"{(extra + gap) / asked:.1%} more than the {asked:,} bytes asked, above "
                f"max_over_read={max_over_read:g}: raise either bound"
            )
        if fit < many:  # max_requests met inside the equal gaps
            break
    spans: list[Block] = []
    join = False
    for at, (start, length, stride, count) in enumerate(blocks):
        first = [start, inside[at] * stride + length, stride, 1]
        rest = count - 1 - inside[at]
        if join:
            last = spans[-1]
            if last[3] > 1:
                last[3] -= 1
                last = [last[0] + last[3] * last[2], last[1], last[2], 1]
                spans.append(last)
            last[1] = max(last[0] + last[1], start + first[1]) - last[0]
        else:
            spans.append(first)
        if rest:
            spans.append([start + (inside[at] + 1) * stride, length, stride, rest])
        join = after[at]
    return spans


def _joined_within(extra: int, gap: int, budget: float) -> int:
    """The most gaps of `gap` bytes that keep ``extra + count * gap`` within `budget`."""
    count = max(0, int((budget - extra) // gap))
    while count and extra + count * gap > budget:
        count -= 1
    while extra + (count + 1) * gap <= budget:
        count += 1
    return count


def request_blocks(
    spans: list[Block],
    part_size: int,
    max_workers: int,
    small: list[bool] | None = None,
    small_part: int = 0,
) -> list[Block]:
    """The requests that read `spans`, as `parts` cuts them: a span longer than the part
    length cut into the fewest equal parts no longer than it; one marked in `small` (read
    through a staging buffer) no longer than `small_part` either."""
    total = sum(length * count for _, length, _, count in spans)
    longest = part_length(total, part_size, streams(max_workers))
    out: list[Block] = []
    for index, block in enumerate(spans):
        start, length, stride, count = block
        most = min(longest, small_part) if small is not None and small[index] else longest
        if length <= most:
            out.append(block)
            continue
        pieces = -(-length // most)
        bounds = [length * i // pieces for i in range(pieces + 1)]
        for first in range(start, start + count * stride, stride):
            out += [[first + bounds[i], bounds[i + 1] - bounds[i], 1, 1] for i in range(pieces)]
    return out


def crowded(spans: list[Block], blocks: list[Block], below: int) -> list[bool]:
    """For each span (one of `joined_blocks`'), whether it holds several of the asked runs
    (`blocks`, sorted) averaging less than `below` bytes: a span read through a staging
    buffer. Counted a block at a time, not a run at a time."""
    starts = [block[0] for block in blocks]
    out = []
    for start, length, _, count in spans:
        if count > 1:  # equal spans a stride apart: a run each, not joined
            out.append(False)
            continue
        stop = start + length
        runs = asked = 0
        at = max(0, bisect_right(starts, start) - 1)
        while at < len(blocks) and starts[at] < stop:
            first, size, step, number = blocks[at]
            at += 1
            # The block's runs that start inside [start, stop).
            low = max(0, -(-(start - first) // step))
            high = min(number, -(-(stop - first) // step))
            if high > low:
                runs += high - low
                asked += (high - low) * size
        out.append(runs > 1 and asked < below * runs)
    return out


def shown(name: str | None) -> str:
    """A file of a plan, as messages name it."""
    return "the file" if name is None else repr(name)
