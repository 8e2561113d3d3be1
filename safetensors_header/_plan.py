"""Read plans: which bytes of which files a loader reads for its share of the tensors.

Layer: services (on the data path).

A tensor-parallel rank needs rows, columns or experts of many tensors in many files. A
`ReadPlan` says, before a byte is read, which requests go to which file (runs of bytes
joined across small gaps, cut into the parts the data path sends), how many bytes beyond
those asked they read, and where every asked byte lands. It is data: printed, compared,
pickled to the rank that executes it (`ReadPlan.read`), which then makes those requests and
no others, each byte copied once into its tensor's buffer.

Joining runs trades bytes for requests. The gaps are joined smallest first, as the data path
joins them: every gap up to ``gap`` bytes (a request costs more than that many bytes: 1 MiB
over a network, 4 KiB locally), then as many more as ``max_requests`` (per file) needs, the
bytes read staying within ``max_over_read`` (a ratio of the bytes asked) throughout. Joining
the smallest gaps first reads the fewest extra bytes for any number of requests.
"""

from __future__ import annotations

import fnmatch
import math
import operator
from collections.abc import Mapping, Sequence

from ._checkpoint import files_of
from ._core.fileformat import DTYPE_BITS
from ._core.geometry import selected
from ._core.records import frozen_record, set_fields
from ._fetch import SafetensorsFile
from ._runs import Requests, Runs, blocks_of, crowded, joined_blocks, request_blocks, shown
from ._sources.options import Clock, Options
from ._sources.planning import allocate, check_fits
from ._staging import OFFSET, STAGE_BELOW, STAGE_PART, execute

__all__ = ["Parts", "PlannedTensor", "ReadPlan", "Split", "plan_reads", "planned"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, Final, TypeAlias

    from typing_extensions import Unpack

    from ._core.header import TensorInfo
    from ._runs import Block
    from ._sources.planning import Segment
    from ._sources.transport import Transport
    from ._staging import Strided

    #: What is read of one tensor: ``None`` (all of it), a `Split`, or a numpy basic index.
    Selection: TypeAlias = object
    Selector: TypeAlias = Mapping[str, object] | Callable[[TensorInfo], object]

_SKIP: Final = object()  # a callable's answer for a tensor not read

_SHOWN_FILES: Final = 8  # files a plan's summary lists


@frozen_record(module="safetensors_header.plan")
class Split:
    """Part `rank` of `world` equal parts of a tensor along `axis`, as ``numpy.array_split``
    cuts it: the first ``size % world`` parts one element longer than the others.

    A tensor of fewer dimensions than ``axis + 1`` (a scalar, a bias split along axis 1) is
    not split: every rank reads all of it.
    """

    __slots__ = ("rank", "world", "axis")  # noqa: RUF023 - the fields, in order

    rank: int
    world: int
    axis: int

    def __init__(self, rank: int, world: int, axis: int = 0) -> None:
        rank, world, axis = operator.index(rank), operator.index(world), operator.index(axis)
        if world < 1 or not 0 <= rank < world:
            raise ValueError(
                f"rank must be in 0..world-1 and world 1 or more, not {rank} of {world}"
            )
        if axis < 0:
            raise ValueError(f"axis must be 0 or more, not {axis}")
        set_fields(self, Split, (rank, world, axis))

    def key(self, shape: tuple[int, ...]) -> tuple[slice, ...] | None:
        """The basic index of this part of a tensor of `shape` (``None``: all of it)."""
        if self.axis >= len(shape):
            return None
        size = shape[self.axis]
        base, extra = divmod(size, self.world)
        start = self.rank * base + min(self.rank, extra)
        stop = start + base + (1 if self.rank < extra else 0)
        return (*(slice(None),) * self.axis, slice(start, stop))

    def __repr__(self) -> str:
        return f"Split({self.rank}, {self.world}, axis={self.axis})"


@frozen_record(module="safetensors_header.plan")
class Parts:
    """Part `rank` of `world` of a fused tensor (a QKV, a gate and up projection in one):
    each of its `parts` along `axis` split as `Split` cuts it (or whole on every rank, where
    its ``split`` is False), the rank's pieces joined along `axis` in order.

    Attributes:
        parts: ``(size, split)`` pairs: the parts' sizes along `axis`, in order (their sum
            is the tensor's size there), and whether each is split.
    """

    __slots__ = ("rank", "world", "axis", "parts")  # noqa: RUF023 - the fields, in order

    rank: int
    world: int
    axis: int
    parts: tuple[tuple[int, bool], ...]

    def __init__(self, rank: int, world: int, axis: int, parts: Iterable[tuple[int, bool]]) -> None:
        Split(rank, world, axis)  # the same checks
        pairs = tuple((operator.index(size), bool(split)) for size, split in parts)
        if not pairs or any(size < 0 for size, _ in pairs):
            raise ValueError(f"parts must be (size >= 0, split) pairs, not {pairs!r}")
        set_fields(self, Parts, (operator.index(rank), operator.index(world), axis, pairs))

    def pieces(self) -> list[tuple[int, int]]:
        """``[start, stop)`` along `axis` of each of the rank's pieces, in order."""
        pieces, at = [], 0
        for size, split in self.parts:
            if split:
                base, extra = divmod(size, self.world)
                first = at + self.rank * base + min(self.rank, extra)
                pieces.append((first, first + base + (1 if self.rank < extra else 0)))
            else:
                pieces.append((at, at + size))
            at += size
        return pieces

    def __repr__(self) -> str:
        return f"Parts({self.rank}, {self.world}, axis={self.axis}, parts={self.parts})"


@frozen_record(module="safetensors_header.plan")
class PlannedTensor:
    """One tensor of a `ReadPlan`: what is read of it, and from where.

    Attributes:
        name: The tensor's name.
        file: The file that holds it (a checkpoint's shard name; ``None`` for a single file).
        dtype: Its dtype, as in the header.
        shape: The shape of what is read (``tensor[key]``'s).
        ranges: ``(absolute file offset, length)`` pairs: joined in this order, their bytes
            are ``tensor[key]`` in C order. A tuple, or for a `Split` a `Runs` (equal runs
            a stride apart: a run per row, held as four numbers).
        selection: What is read of it: ``None`` (all of it), a `Split` (its axis says which),
            `Parts`, or the numpy basic index given.
        rule: Why, for a rank's share (`plan_rank`): the rule that chose the selection
            (``"row-parallel, axis 1"``, ``"norm: whole"``...); ``None`` otherwise.
    """

    __slots__ = ("name", "file", "dtype", "shape", "ranges", "selection", "rule")  # noqa: RUF023

    name: str
    file: str | None
    dtype: str
    shape: tuple[int, ...]
    ranges: Sequence[tuple[int, int]]
    selection: object
    rule: str | None

    def __init__(  # noqa: PLR0917 - the fields, in order
        self,
        name: str,
        file: str | None,
        dtype: str,
        shape: tuple[int, ...],
        ranges: Sequence[tuple[int, int]],
        selection: object = None,
        rule: str | None = None,
    ) -> None:
        set_fields(self, PlannedTensor, (name, file, dtype, shape, ranges, selection, rule))

    @property
    def axis(self) -> int | None:
        """The axis a `Split` or `Parts` cuts; ``None`` for a tensor read whole (or by an
        index)."""
        if isinstance(self.selection, (Split, Parts)) and len(self.shape) > self.selection.axis:
            return self.selection.axis
        return None

    @property
    def nbytes(self) -> int:
        """The bytes read of the tensor (what lands in its buffer)."""
        if isinstance(self.ranges, Runs):
            return self.ranges.nbytes
        return sum(length for _, length in self.ranges)

    def __repr__(self) -> str:
        return (
            f"<PlannedTensor {self.name!r} {self.dtype} {list(self.shape)}, "
            f"{len(self.ranges):,} range{'' if len(self.ranges) == 1 else 's'}>"
        )


@frozen_record(uncompared=("files",), module="safetensors_header.plan")
class ReadPlan:
    """The requests a loader makes for its tensors, and where their bytes land: `plan_reads`.

    Attributes:
        tensors: The tensors read, in the order of their files and their first byte.
        requests: ``(file, start, stop)`` of every request, in the order of the files and of
            the bytes; a long run cut into parts as the data path cuts it (`plan_reads`). A
            `Requests`: a sequence of those triples, the rows of a split held as one entry.
        files: File name (as in `PlannedTensor.file`) -> the `SafetensorsFile` read: the
            files as opened, so that a plan read elsewhere (pickled to a rank) reads the very
            files planned for, checked. Not compared by ``==``.
    """

    __slots__ = ("tensors", "requests", "files")  # noqa: RUF023 - the fields, in order

    tensors: tuple[PlannedTensor, ...]
    requests: Requests
    files: tuple[tuple[str | None, SafetensorsFile], ...]

    def __init__(
        self,
        tensors: tuple[PlannedTensor, ...],
        requests: Requests | Iterable[tuple[str | None, int, int]],
        files: tuple[tuple[str | None, SafetensorsFile], ...],
    ) -> None:
        if not isinstance(requests, Requests):  # triples, as `requests` iterates
            requests = Requests(
                (file, start, stop - start, max(stop - start, 1), 1)
                for file, start, stop in requests
            )
        set_fields(self, ReadPlan, (tensors, requests, files))

    @property
    def bytes_asked(self) -> int:
        """The bytes the tensors' selections hold."""
        return sum(tensor.nbytes for tensor in self.tensors)

    @property
    def bytes_read(self) -> int:
        """The bytes the requests fetch: those asked, and the gaps joined between them."""
        return sum(read for _, read in self.requests.per_file().values())

    @property
    def over_read(self) -> float:
        """``bytes_read / bytes_asked - 1``: 0.0 when nothing but what was asked is read."""
        asked = self.bytes_asked
        return self.bytes_read / asked - 1 if asked else 0.0

    def requests_per_file(self) -> dict[str | None, int]:
        """File name -> the number of requests made to it."""
        made = self.requests.per_file()
        return {name: made.get(name, (0, 0))[0] for name, _ in self.files}

    def summary(self) -> str:
        """A few lines for people: tensors, requests, bytes asked and read, per file."""
        counts = self.requests_per_file()
        made = self.requests.per_file()
        read = {name: made.get(name, (0, 0))[1] for name in counts}
        runs = [len(tensor.ranges) for tensor in self.tensors]
        strided = sum(1 for count in runs if count > 1)
        lines = [
            f"{len(self.tensors):,} tensors, {len(self.requests):,} requests to "
            f"{len(counts):,} file{'' if len(counts) == 1 else 's'}: {self.bytes_asked:,} bytes "
            f"asked, {self.bytes_read:,} read (over-read {self.over_read:.1%})",
            f"{sum(runs):,} runs of bytes asked; {strided:,} tensors in more than one run "
            "(a split along a later axis: a run per row)",
        ]
        shared = [tensor for tensor in self.tensors if tensor.rule is not None]
        if shared:  # a rank's share (`plan_rank`): what is split, and how
            axes: dict[int, int] = {}
            for tensor in shared:
                if tensor.axis is not None:
                    axes[tensor.axis] = axes.get(tensor.axis, 0) + 1
            fused = sum(1 for tensor in shared if isinstance(tensor.selection, Parts))
            said = [f"{count:,} split along axis {axis}" for axis, count in sorted(axes.items())]
            whole = len(shared) - sum(axes.values())
            lines.append(
                f"a rank's share: {', '.join(said) or 'none split'}"
                f"{f' ({fused:,} part by part)' if fused else ''}, {whole:,} whole on every rank"
            )
        for name in list(counts)[:_SHOWN_FILES]:
            shown = "the file" if name is None else name
            lines.append(f"  {shown}: {counts[name]:,} requests, {read[name]:,} bytes")
        if len(counts) > _SHOWN_FILES:
            lines.append(f"  ... and {len(counts) - _SHOWN_FILES:,} more files")
        return "\n".join(lines)

    def read(
        self, *, timeout: float | None = None, max_workers: int | None = None
    ) -> dict[str, memoryview]:
        """Execute the plan: each tensor's selected bytes, in C order, by name.

        Every request of `requests` is made once, the files' requests in parallel (at most
        `max_workers` files at once; each file's parts as its options say), each asked byte
        copied once, from the request into its tensor's buffer. The files are checked to be
        the ones planned for (``FileChanged``, `RemoteError`). `timeout` bounds the whole
        call.
        """
        clock = Clock(timeout)
        check_fits(sum(tensor.nbytes for tensor in self.tensors))  # (all of them, together)
        buffers = {tensor.name: allocate(tensor.nbytes) for tensor in self.tensors}
        per_file: dict[str | None, tuple[list[Segment], list[Strided]]] = {}
        for tensor in self.tensors:
            target, at = buffers[tensor.name], 0
            segments, strided = per_file.setdefault(tensor.file, ([], []))
            ranges = tensor.ranges
            if isinstance(ranges, Runs) and ranges.number > 1:
                strided.append((ranges, target))  # its rows copied at once, never one by one
                continue
            for offset, length in ranges:
                segments.append((offset, target[at : at + length]))
                at += length
        files = dict(self.files)
        jobs = [
            (
                files[name],
                self.requests.spans(name),
                sorted(segments, key=OFFSET),
                sorted(strided, key=_first_run),
            )
            for name, (segments, strided) in per_file.items()
        ]
        from ._sources.threads import run_parallel

        workers = len(jobs) if max_workers is None else max(1, min(max_workers, len(jobs)))
        run_parallel(lambda job: execute(*job, clock), jobs, workers)
        return buffers

    def __repr__(self) -> str:
        return (
            f"<ReadPlan {len(self.tensors):,} tensors, {len(self.requests):,} requests, "
            f"{self.bytes_read:,} bytes (over-read {self.over_read:.1%})>"
        )


def plan_reads(
    source: Any,
    select: Selector | None = None,
    /,
    *,
    gap: int | None = None,
    max_over_read: float | None = None,
    max_requests: int | None = None,
    **transport: Unpack[Transport],
) -> ReadPlan:
    """Plan the reads of a selection of tensors of a file or a checkpoint.

    Args:
        source: A `Checkpoint` (its shards are read), a `SafetensorsFile`, a checkpoint's
            directory or index (a path, or a URL ending in ``.json``), or any source
            `open_file` takes (opened here).
        select: What to read of which tensor. A mapping of tensor names, or of glob patterns
            (``"model.layers.*.mlp.experts.[0-7].*"``; the first that matches a name wins,
            exact names before patterns), to a selection: ``None`` (the whole tensor), a
            `Split` (a rank's part along an axis), or a numpy basic index (ints, slices,
            ``...``: ``numpy.s_[:, 128:256]``). Tensors it does not name are not read. Or a
            function of the `TensorInfo` that returns a selection, or ``False`` to leave the
            tensor out. ``None`` (the default): every tensor whole.
        gap: Runs less than this many bytes apart are one request (their gap read and
            dropped); default: the file's (`SafetensorsFile.gap`: 1 MiB for URLs and object
            stores, 4 KiB locally); ``0``: only touching runs.
        max_over_read: The most bytes read beyond those asked, per file, as a ratio of the
            bytes asked (0.25: at most 25 % more; ``None``: no bound). No gap is joined past
            it, `gap` or not.
        max_requests: The most requests per file (``None``: no bound). Gaps wider than
            `gap` are then joined, smallest first, until it is met; a ValueError says when
            that would read more than `max_over_read` allows.
        **transport: How the source is reached (`Transport`), for its headers and for the
            plan's reads: ``part_size`` and ``max_workers`` cut a longer run into parts, read
            in parallel, as the data path cuts it: parts of `part_size` bytes, or one per
            stream (up to ``4 * part_size`` each; `max_workers` streams, 2 a core at most,
            or 4) where that makes fewer requests.

    Returns:
        A `ReadPlan`; ``plan.read()`` executes it, ``plan.summary()`` describes it.

    Raises:
        KeyError: A name in `select` (not a pattern) is not a tensor of the source.
        IndexError, TypeError, ValueError: A selection that does not fit its tensor (as
            `TensorInfo.byte_ranges`); bounds that cannot both be met.
    """
    options = Options.given("plan_reads", transport)
    files = files_of(source, **transport)
    return planned(files, _chooser(select, files), options, gap, max_over_read, max_requests)


def planned(  # noqa: PLR0917 - plan_reads' arguments
    files: list[tuple[str | None, SafetensorsFile]],
    choose: Callable[[TensorInfo], object],
    options: Options,
    gap: int | None,
    max_over_read: float | None,
    max_requests: int | None,
    rules: Mapping[str, str] | None = None,
) -> ReadPlan:
    """`plan_reads` of files opened: `choose` gives each tensor's selection (or `_SKIP`);
    `rules` the rule of each (`_ranks.plan_rank`)."""
    if max_over_read is not None and not max_over_read >= 0:
        raise ValueError(f"max_over_read must be 0 or more or None, not {max_over_read!r}")
    if gap is not None and operator.index(gap) < 0:
        raise ValueError(f"gap must be 0 or more, not {gap!r}")
    if max_requests is not None and operator.index(max_requests) < 1:
        raise ValueError(f"max_requests must be 1 or more, not {max_requests!r}")
    part_size, max_workers = options.part_size, options.max_workers
    tensors: list[PlannedTensor] = []
    requests: list[tuple[str | None, int, int, int, int]] = []
    for name, file in files:
        planned = []
        blocks: list[Block] = []
        for info in file.header.tensors.values():
            selection = choose(info)
            if selection is _SKIP:
                continue
            ranges, shape = _ranges(info, selection)
            rule = None if rules is None else rules.get(info.name)
            planned.append(
                PlannedTensor(info.name, name, info.dtype, shape, ranges, selection, rule)
            )
            blocks += blocks_of(ranges)
        tensors += planned
        blocks.sort()
        joinable = file.gap if gap is None else gap
        spans = joined_blocks(blocks, joinable, max_over_read, max_requests, name)
        # A span of many small runs is read through a staging buffer: at most STAGE_PART.
        small = crowded(spans, blocks, STAGE_BELOW)
        made = request_blocks(spans, part_size, max_workers, small, STAGE_PART)
        count = sum(block[3] for block in made)
        if max_requests is not None and count > max_requests:
            longest = max(block[1] for block in made)
            raise ValueError(
                f"{shown(name)}: {count:,} requests of at most {longest:,} bytes "
                f"(part_size={part_size:,}) are needed, above max_requests={max_requests:,}: "
                "raise part_size or max_requests"
            )
        requests += [(name, start, length, stride, count) for start, length, stride, count in made]
    return ReadPlan(tuple(tensors), Requests(requests), tuple(files))


def _chooser(
    select: Selector | None, files: list[tuple[str | None, SafetensorsFile]]
) -> Callable[[TensorInfo], object]:
    """`select` as a function of a tensor: its selection, or `_SKIP`."""
    if select is None:
        return lambda info: None
    if not isinstance(select, Mapping):
        if not callable(select):
            raise TypeError(
                "select must be a mapping of names or patterns to selections, or a function "
                f"of a TensorInfo, not {type(select).__name__}"
            )
        chosen = select

        def call(info: TensorInfo) -> object:
            selection = chosen(info)
            return _SKIP if selection is False else selection

        return call
    names = {name for _, file in files for name in file.header.tensors}
    exact: dict[str, object] = {}
    patterns: list[tuple[str, object]] = []
    for key, selection in select.items():
        if not isinstance(key, str):
            raise TypeError(f"select's keys are tensor names or patterns, not {key!r:.60}")
        if key in names:
            exact[key] = selection
        elif any(char in key for char in "*?["):
            patterns.append((key, selection))
        else:
            raise KeyError(f"no tensor {key!r} in the source")

    def choose(info: TensorInfo) -> object:
        if info.name in exact:
            return exact[info.name]
        for pattern, selection in patterns:
            if fnmatch.fnmatchcase(info.name, pattern):
                return selection
        return _SKIP

    return choose


def _ranges(
    info: TensorInfo, selection: object
) -> tuple[Sequence[tuple[int, int]], tuple[int, ...]]:
    """The ranges of `selection` of a tensor, and the shape read."""
    if isinstance(selection, Split):
        split = _split_ranges(info, selection)
        if split is not None:
            return split
        key: object = selection.key(info.shape)
    elif isinstance(selection, Parts):
        return _parts_ranges(info, selection)
    else:
        key = selection
    if key is None:
        return (((info.start, info.nbytes),) if info.nbytes else ()), info.shape
    ranges, shape = selected(info, key)
    return tuple(ranges), shape


def _parts_ranges(
    info: TensorInfo, parts: Parts
) -> tuple[Sequence[tuple[int, int]], tuple[int, ...]]:
    """A fused tensor's pieces of a rank, joined along their axis: a run a piece for each
    index of the axes before it (touching runs joined)."""
    shape, axis = info.shape, parts.axis
    if axis >= len(shape):
        return _ranges(info, None)
    size = shape[axis]
    if sum(length for length, _ in parts.parts) != size:
        raise ValueError(
            f"{info.name!r}: parts {[length for length, _ in parts.parts]} do not add up to "
            f"its size {size:,} along axis {axis} (shape {list(shape)})"
        )
    bits = DTYPE_BITS[info.dtype]
    row = math.prod(shape[axis + 1 :]) * bits
    if row % 8:
        raise ValueError(
            f"{info.name!r}: a {info.dtype} tensor's parts along axis {axis} do not fall on "
            "byte boundaries"
        )
    row //= 8
    pieces = parts.pieces()
    result = (*shape[:axis], sum(stop - start for start, stop in pieces), *shape[axis + 1 :])
    ranges: list[tuple[int, int]] = []
    for outer in range(math.prod(shape[:axis])):
        base = info.start + outer * size * row
        for start, stop in pieces:
            offset, length = base + start * row, (stop - start) * row
            if not length:
                continue
            if ranges and ranges[-1][0] + ranges[-1][1] == offset:
                ranges[-1] = (ranges[-1][0], ranges[-1][1] + length)
            else:
                ranges.append((offset, length))
    return tuple(ranges), result


def _split_ranges(
    info: TensorInfo, split: Split
) -> tuple[Sequence[tuple[int, int]], tuple[int, ...]] | None:
    """A split's part of a tensor as one `Runs` (a run per index of the axes before the
    split's), without a pair per row; ``None`` for a packed dtype (`selected` decides it,
    and says where a cut falls inside a byte)."""
    shape, axis = info.shape, split.axis
    bits = DTYPE_BITS[info.dtype]
    if axis >= len(shape) or bits % 8:
        return None
    size = shape[axis]
    base, extra = divmod(size, split.world)
    first = split.rank * base + min(split.rank, extra)
    part = base + (1 if split.rank < extra else 0)
    result = (*shape[:axis], part, *shape[axis + 1 :])
    outer = math.prod(shape[:axis])
    row = math.prod(shape[axis + 1 :]) * (bits // 8)
    length = part * row
    if not length or not outer:
        return (), result
    start = info.start + first * row
    if outer == 1 or part == size:
        return ((start, length * outer),), result
    return Runs(start, length, size * row, outer), result


def _first_run(part: Strided) -> int:
    return part[0].start
