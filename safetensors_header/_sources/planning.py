"""How ranged reads are planned: spans, parts, segments, buffers, and where ranges end.

Layer: sources. Pure arithmetic over ``(offset, length)`` ranges and the requests that read
them, shared by every backend (`base.RangeFile.read_ranges`) and by read plans (`_plan`):
ranges joined across gaps into spans (`joined`), each range a view of its span's buffer
(`cut_out`); long reads cut into equal parts for parallel streams (`parts`, `cut`,
`part_length`, `streams`), with the parts of the destination buffers inside each
(`with_segments`); fresh buffers (`allocate`); and the error for a range past a file's end
(`check_known_end`, `past_the_end`).
"""

from __future__ import annotations

import os
from functools import cache

from .._errors import HeaderError

__all__ = ["allocate", "check_fits", "check_known_end", "cut", "cut_out", "joined"]
__all__ += ["memory_limit", "part_length", "parts"]
__all__ += ["past_the_end", "streams", "with_segments"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Final, TypeAlias

    #: Bytes of a file read into memory: ``(offset in the file, a writable view)`` pairs.
    Segment: TypeAlias = tuple[int, memoryview]
    #: One request: ``[start, stop)`` of the file, its bytes landing in the segments (sorted,
    #: disjoint, inside the span); bytes between the segments are read and dropped.
    Read: TypeAlias = tuple[int, int, list[Segment]]

# Buffers from this size up are fresh anonymous memory (see `allocate`).
_MAPPED: Final = 1 << 21
# The parts of a long read grow up to this many times `part_size` (see `part_length`).
_PART_GROWTH: Final = 4
# The parts of one long read in flight: at most this many per core, and this many at least
# (see `streams`).
_STREAMS_PER_CORE: Final = 2
_STREAMS_AT_LEAST: Final = 4


def joined(reads: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Sorted ``[start, stop)`` reads, those less than `gap` bytes apart joined into one."""
    spans: list[tuple[int, int]] = []
    for start, stop in reads:
        if spans and start - spans[-1][1] <= gap:  # touching and overlapping reads too
            if stop > spans[-1][1]:
                spans[-1] = (spans[-1][0], stop)
        else:
            spans.append((start, stop))
    return spans


def cut_out(
    ranges: Sequence[tuple[int, int]], spans: list[tuple[int, int]], buffers: list[memoryview]
) -> list[memoryview]:
    """Every range, as a view of the buffer of the span that holds it."""
    from bisect import bisect_right

    starts = [start for start, _ in spans]
    out = []
    empty = memoryview(b"")
    for offset, length in ranges:
        if not length:
            out.append(empty)
            continue
        index = bisect_right(starts, offset) - 1
        at = offset - starts[index]
        out.append(buffers[index][at : at + length])
    return out


def part_length(total: int, part_size: int, workers: int) -> int:
    """How long the parts are of reads of `total` bytes made on `workers` threads.

    `part_size`, or longer where that would make more requests than there are workers: one
    request per worker then, up to ``4 * part_size`` each. Every request costs a round trip
    and the server's work of starting a reply; fewer, longer ones still keep every worker
    busy, and the cap bounds what one retry reads again.
    """
    return max(part_size, min(part_size * _PART_GROWTH, -(-total // workers)))


def streams(max_workers: int) -> int:
    """How many parts of one long read are in flight: `max_workers`, at most 2 per core
    (4 on one or two cores).

    Every byte of a part costs this process's CPU (the kernel's copy into the buffer, the
    zeroing of its fresh pages); past a few streams a core, more add no speed and cost system
    time: on 2 cores, 16 streams took 3-5 times the system time per GB of 8 or 4, and 4 were
    the fastest from both loopback servers measured (nginx, s3rver).
    """
    cores = os.cpu_count() or 1
    return max(1, min(max_workers, max(_STREAMS_AT_LEAST, _STREAMS_PER_CORE * cores)))


def parts(reads: Sequence[Read], part_size: int, max_workers: int) -> list[Read]:
    """The requests that read `reads` on ``streams(max_workers)`` threads: every read
    longer than `part_length` cut into equal parts no longer than it (`cut`)."""
    total = sum(stop - start for start, stop, _ in reads)
    return cut(reads, part_length(total, part_size, streams(max_workers)))


def cut(reads: Iterable[Read], length: int) -> list[Read]:
    """Every read longer than `length` cut into the fewest equal parts no longer than it."""
    out: list[Read] = []
    for read in reads:
        start, stop, segments = read
        span = stop - start
        if span <= length:
            out.append(read)
            continue
        count = -(-span // length)
        bounds = [start + span * i // count for i in range(count + 1)]
        out += with_segments([(bounds[i], bounds[i + 1]) for i in range(count)], segments)
    return out


def with_segments(spans: Sequence[tuple[int, int]], segments: Sequence[Segment]) -> list[Read]:
    """Each of the sorted `spans` with the parts of the sorted `segments` inside it (a
    segment that crosses a span's end is cut there; bytes between spans go nowhere)."""
    reads: list[Read] = []
    index = 0
    for start, stop in spans:
        inside: list[Segment] = []
        while index < len(segments):
            offset, view = segments[index]
            end = offset + len(view)
            if offset >= stop:
                break
            low, high = max(offset, start), min(end, stop)
            if low < high:
                inside.append((low, view[low - offset : high - offset]))
            if end > stop:
                break  # the rest of it is in the next span
            index += 1
        reads.append((start, stop, inside))
    return reads


def allocate(count: int) -> memoryview:
    """A writable buffer of `count` bytes, for bytes about to be read into it.

    From 2 MiB up, fresh private anonymous memory, its pages made by the kernel as the read
    fills them (a bytearray would be zeroed first: a pass over the memory for nothing), in
    the system's small pages: no huge-page advice, whose faults each zero 2 MiB at once and,
    where the system defragments for the advice (``defrag=madvise``, the default), may wait
    on compaction. Measured (``benchmarks/bench_load.py --parts alloc``, a 1 GB checkpoint):
    over loopback HTTP, 1.60 s of system time a load with the advice and its slowest round
    1.69x its median, 1.16 s and 1.15x without; locally 1.51 s against 0.68 s. Prefaulting
    at once (``MAP_POPULATE``) saved more system time on 2 cores (0.87 s), but zeroes the
    whole buffer in one thread before the first byte is read, where the faults of small
    pages are taken by the threads that read.
    """
    if count < _MAPPED:
        return memoryview(bytearray(count))
    check_fits(count)
    import mmap

    try:
        if hasattr(mmap, "MAP_PRIVATE"):  # POSIX
            memory = mmap.mmap(-1, count, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        else:  # Windows: bytearray's zeroing is what is left
            return memoryview(bytearray(count))
    except (OSError, OverflowError, ValueError):
        raise HeaderError(
            "TooLarge", f"the system refused a buffer of {count:,} bytes for the data"
        ) from None
    return memoryview(memory)


def check_fits(count: int) -> None:
    """``TooLarge`` for `count` bytes of data to be read into memory that the machine's
    memory and swap together cannot hold (a file, or a server, that claims petabytes): said
    before anything is allocated, not a ``MemoryError`` or the kernel's out-of-memory kill."""
    limit = memory_limit()
    if limit is not None and count > limit:
        raise HeaderError(
            "TooLarge",
            f"the data to read is {count:,} bytes, more than this machine's memory and swap "
            f"({limit:,} bytes) can hold; read it in parts (read_ranges, a tensor's slices), "
            "or map a local file (mmap=True)",
        )


@cache
def memory_limit() -> int | None:
    """The memory and swap this process may use, in bytes: the machine's, or its control
    group's where that is less (a container's ``memory.max`` and ``memory.swap.max``); None
    where the system does not say."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):  # (Windows has no sysconf)
        return None
    if physical <= 0:
        return None
    swap = _system_number("/proc/meminfo", b"SwapTotal:", 1024) or 0  # (not Linux: memory alone)
    group = _system_number("/sys/fs/cgroup/memory.max")
    if group is not None:
        group_swap = _system_number("/sys/fs/cgroup/memory.swap.max")
        return min(physical + swap, group + (swap if group_swap is None else group_swap))
    return physical + swap


def _system_number(path: str, key: bytes = b"", unit: int = 1) -> int | None:
    """The number a system file holds (after `key`, on its line, in `unit` bytes); None
    where there is no such file or number (``max``: no limit)."""
    try:
        with open(path, "rb") as file:
            for line in file:
                if line.startswith(key):
                    return int(line[len(key) :].split()[0]) * unit
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_known_end(ranges: Sequence[tuple[int, int]], size: int | None) -> None:
    """HeaderError before any read for a range past the end of a file of known size."""
    if size is None:
        return
    for offset, length in ranges:
        if length and offset + length > size:
            raise past_the_end(ranges, size, size)


def past_the_end(ranges: Sequence[tuple[int, int]], end: int, size: int | None) -> HeaderError:
    """MetadataIncompleteBuffer for the first range that ends past `end` (where the file
    ends)."""
    offset, length = next(
        ((offset, length) for offset, length in ranges if length and offset + length > end),
        (end, 0),
    )
    where = f"is {size:,} bytes" if size is not None else f"ended at byte {end:,}"
    return HeaderError(
        "MetadataIncompleteBuffer",
        f"the file {where}: it ends before the range of {length:,} bytes at offset "
        f"{offset:,} does (at byte {offset + length:,})",
        offset=end,
    )
