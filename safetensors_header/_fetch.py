"""The data path: a file opened once, and the bytes of its tensors read from any source.

Layer: services (on the source layer). `open_file` reads a file's header and keeps the file
it came from, pinned (its size, and its ETag, Last-Modified or inode and modification
time): every later read of the `SafetensorsFile` is checked to be of that same file.
`read_ranges` and `read_tensor` read byte ranges and tensors from a path, a URL, an object
store, a file object, bytes, or a file opened already; each byte is copied once, into the
buffer it is returned in (``os.preadv`` for paths, ``readinto`` from HTTP bodies, obstore's
own buffers), and ranges that are close together are read as one span whose buffer they
are views of.
"""

from __future__ import annotations

import operator

from ._core.fileformat import MAX_HEADER_SIZE
from ._core.records import publish
from ._errors import HeaderError
from ._sources import open_source
from ._sources.base import header_of, held_after_pickling, map_whole, refuse_a_stream
from ._sources.base import read_planned as _read_planned
from ._sources.options import TIMEOUT, Clock, Options
from ._sources.planning import allocate
from ._sources.urls import beside

__all__ = ["SafetensorsFile", "beside", "chosen_tensors", "map_opened", "open_file"]
__all__ += ["open_to_load", "opened"]
__all__ += ["read_beside"]
__all__ += ["read_planned", "read_ranges", "read_tensor"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import mmap
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any, Protocol

    from typing_extensions import Unpack

    class Checkpoint(Protocol):
        # What read_tensor needs of a `Checkpoint`: a shard for each tensor.
        weight_map: Mapping[str, str]
        shards: Mapping[str, SafetensorsFile]

    from ._core.header import Header, TensorInfo
    from ._sources import Source
    from ._sources.base import RangeFile
    from ._sources.planning import Read
    from ._sources.transport import Transport


class SafetensorsFile:
    """A safetensors file opened once: its validated header, and reads of its bytes.

    Made by `open_file` (and held by `Checkpoint.shards`). Every read is checked to be of
    the file the header was read from (its `FileIdentity`): a file replaced or rewritten in
    between raises `HeaderError` of kind ``FileChanged``, never bytes of two files. It
    holds no open file or connection between reads (a local file is opened again, and
    checked, for each), so it needs no closing, may be read from many threads at once, and
    can be pickled (to a worker process, say).

    Attributes:
        header: The file's `Header`.
        source: The file, as shown in messages (a URL without its credentials).
    """

    __slots__ = ("_range_file", "header")

    def __init__(self, header: Header, file: RangeFile) -> None:
        self.header = header
        self._range_file = file

    @property
    def source(self) -> str:
        return self._range_file.shown

    @property
    def location(self) -> str:
        """Where the file is, as another tool opens it: its URL (credentials, a signed
        query and all: not for messages), an ``hf://`` path, a local path."""
        return self._range_file.location

    @property
    def remote(self) -> bool:
        """Whether its bytes come over a network (a URL, the Hub, an object store)."""
        return self._range_file.remote

    @property
    def local_path(self) -> str | None:
        """The path of a local regular file (it can be memory-mapped), else None."""
        return self._range_file.local_path

    @property
    def gap(self) -> int:
        """Ranges closer than this many bytes are read as one request (the ``gap`` of
        `read_ranges` when none is given: 1 MiB for URLs and object stores, 4 KiB locally)."""
        file = self._range_file
        return file.default_gap if file.options.gap is None else file.options.gap

    def read_ranges(
        self,
        ranges: Iterable[tuple[int, int]],
        /,
        *,
        gap: int | None = None,
        into: Sequence[Any] | None = None,
        timeout: float | None = None,
    ) -> list[memoryview]:
        """The bytes of each ``(offset, length)`` range of the file: see `read_ranges`."""
        return _read(self._range_file, ranges, gap, into, Clock(timeout))

    def read_tensor(
        self,
        tensor: str | TensorInfo,
        /,
        key: object = None,
        *,
        into: Any = None,
        timeout: float | None = None,
    ) -> memoryview:
        """The bytes of a tensor (of ``tensor[key]`` with a key): see `read_tensor`."""
        info = self.header.tensors[tensor] if isinstance(tensor, str) else tensor
        return _tensor_bytes(self._range_file, info, key, into, Clock(timeout))

    def read_tensors(
        self, tensors: Iterable[str | TensorInfo] | None = None, /, *, timeout: float | None = None
    ) -> dict[str, memoryview]:
        """The bytes of several tensors (default: all), by name, in one planned read:
        adjacent tensors are one span (one request), each tensor a view of it.

        Raises as `read_ranges`; a file that ends early names the tensor it cuts short.
        """
        table = self.header.tensors
        if tensors is None:
            infos = list(table.values())
        elif isinstance(tensors, str):
            raise TypeError("tensors must be an iterable of names, not a str")
        else:
            infos = [table[item] if isinstance(item, str) else item for item in tensors]
        try:
            views = self.read_ranges([(info.start, info.nbytes) for info in infos], timeout=timeout)
        except HeaderError as error:
            end = error.offset
            if error.kind != "MetadataIncompleteBuffer" or end is None:
                raise
            cut = next((info for info in infos if info.nbytes and info.end > end), None)
            if cut is None:
                raise
            raise HeaderError(
                "MetadataIncompleteBuffer",
                f"the file ended {cut.end - end:,} bytes before the end of tensor "
                f"{cut.name!r} (at byte {end:,}, where the tensor's data ends at byte "
                f"{cut.end:,})",
                tensor=cut.name,
                offset=end,
            ) from None
        return {info.name: view for info, view in zip(infos, views, strict=True)}

    def __repr__(self) -> str:
        count = len(self.header.tensors)
        return f"<SafetensorsFile {self.source!r}, {count:,} tensor{'' if count == 1 else 's'}>"

    def __reduce__(self) -> tuple[object, ...]:
        return (_unpickled, (self.header, self._range_file))


def _unpickled(header: Header, file: RangeFile) -> SafetensorsFile:
    """A `SafetensorsFile` in another process: where its source has no decisive validators
    (`decisive`), its header's bytes are compared again before its first read of data there
    (the file may have been replaced since it was pickled)."""
    held_after_pickling(file, header)
    return SafetensorsFile(header, file)


def open_file(
    source: Source,
    /,
    *,
    header: Header | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    **transport: Unpack[Transport],
) -> SafetensorsFile:
    """Open a safetensors file: read and validate its header, and keep the file for reads.

    Args:
        source: What `read_header` reads: a path, a URL, an object store, a file object or
            a bytes-like object.
        header: The file's header, read before (`read_header`, `read_checkpoint`): taken
            as it is, and the file checked to be the one it was read from (its
            `FileIdentity`: the size and validators the source gave then, or, where the
            source gives none, the header's bytes, read again).
        max_header_size: As for `read_header`.
        **transport: How a URL or an object store is reached (`Transport`), kept for the
            file's later reads; ``timeout`` (10 s by default) bounds the header read, and
            the later reads take their own (none by default).

    Returns:
        A `SafetensorsFile`: ``.header``, ``.read_ranges(...)``, ``.read_tensor(...)``.

    Raises:
        HeaderError: As `read_header`.
        RemoteError: As `read_header`.
        OSError: As `read_header`.
    """
    options = Options.given("open_file", transport)
    if header is not None:
        return opened(source, options, header=header)
    file = open_source(source, options.replace(timeout=None))
    header = header_of(file, max_header_size, options.clock())
    if hasattr(file, "close"):
        file.close()  # a pipe's reader stays open for the data that follows
    return SafetensorsFile(header, file)


def opened(
    source: Source,
    options: Options,
    *,
    header: Header | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
) -> SafetensorsFile:
    """`source` opened (a `SafetensorsFile` as it is): its header read with `options`'
    timeout (`TIMEOUT` when it has none), or `header` taken as its header (the file then
    checked to be the one it was read from: `RangeFile.confirm`)."""
    if isinstance(source, SafetensorsFile):
        return source
    file = open_source(source, options.replace(timeout=None))
    return _with_header(file, options, header, max_header_size)


def _with_header(
    file: RangeFile, options: Options, header: Header | None, max_header_size: int
) -> SafetensorsFile:
    if header is None:
        header = header_of(file, max_header_size, options.clock(TIMEOUT))
    else:
        file.confirm(header, options.clock(TIMEOUT))
    return SafetensorsFile(header, file)


def open_to_load(
    function: str,
    source: Source,
    transport: Mapping[str, Any],
    *,
    header: Header | None,
    max_header_size: int,
    mmap: bool | None,
    copy: bool = False,
) -> tuple[SafetensorsFile, mmap.mmap | None]:
    """What every loader (numpy's, torch's, JAX's ``load``) starts with: `source` opened
    once, with `function`'s ``**transport`` keywords (a TypeError names any other), and,
    unless `mmap` is False, a map of all of it where the file can be mapped (a local regular
    file: `map_whole`, `copy`-on-write if asked), its header read through the descriptor
    mapped (or `header` held to it). A `SafetensorsFile` is taken as it is, unmapped."""
    options = Options.given(function, transport, timeout=None)
    if isinstance(source, SafetensorsFile):
        return source, None
    file = open_source(source, options.replace(timeout=None))
    if mmap is not False:
        found = map_whole(file, header=header, max_header_size=max_header_size, copy=copy)
        if found is not None:
            return SafetensorsFile(found[0], file), found[1]
    return _with_header(file, options, header, max_header_size), None


def map_opened(file: SafetensorsFile) -> mmap.mmap | None:
    """A read-only map of `file`, of the file its header was read from (`map_whole`); None
    but for a local regular file."""
    found = map_whole(file._range_file, header=file.header)
    return None if found is None else found[1]


def read_beside(source: Source, name: str, /, limit: int, **transport: Unpack[Transport]) -> bytes:
    """The whole (small) file `name` beside `source` (a model's config.json beside its
    weights), read to at most ``limit + 1`` bytes: as `RangeFile.sibling` names it, for a
    path, a URL, an ``hf://`` path, a store's path or a file opened already."""
    options = Options.given("read_beside", transport)
    if isinstance(source, SafetensorsFile):
        file = source._range_file
    else:
        file = open_source(source, options.replace(timeout=None))
    return file.sibling(name).document(limit, options.clock(TIMEOUT))


def read_ranges(
    source: Source,
    ranges: Iterable[tuple[int, int]],
    /,
    *,
    gap: int | None = None,
    into: Sequence[Any] | None = None,
    header: Header | None = None,
    **transport: Unpack[Transport],
) -> list[memoryview]:
    """The bytes of each ``(offset, length)`` range of a file, in the order given.

    What `TensorInfo.byte_ranges` returns (or ``(info.start, info.nbytes)`` for whole
    tensors) can be passed as it is. Ranges may overlap and come in any order; an empty
    range (length 0) gives an empty view and costs nothing.

    Every byte is copied once, into the buffer it is returned in: ranges closer than `gap`
    are read as one span into one buffer (fresh memory, from ``os.preadv``, an HTTP body's
    ``readinto``, ...), and each range is a ``memoryview`` of it. From an obstore store,
    each range is a view of obstore's own buffer; from a bytes-like source, a view of the
    source itself (no copy at all). A view of a span keeps the whole span's buffer alive.

    Args:
        source: What `read_header` reads: a local path (read with ``os.preadv``: no shared
            file position, safe from many threads), a bytes-like object, a seekable binary
            file object (its position is restored afterwards), an ``http(s)://`` URL, an
            ``hf://`` path, an fsspec URL (``s3://``, ``gs://``, ``memory://``, ...), a
            ``(store, path)`` pair of an obstore store or an fsspec filesystem, or a
            `SafetensorsFile` (its reads checked against the file its header came from).
        ranges: ``(offset, length)`` pairs of non-negative ints.
        gap: Ranges less than this many bytes apart are read as one request (the bytes
            between them are read and dropped). Default: 1 MiB (`REMOTE_GAP`) for URLs and
            object stores, 4 KiB (`LOCAL_GAP`) for local files and file objects; ``0``
            joins only ranges that touch or overlap.
        into: One writable buffer per range (a ``bytearray``, a numpy array, a ``mmap``...),
            of exactly its length: each range is read straight into its own buffer (still
            in as few requests as `gap` allows), and views of them are returned.
        header: The header the ranges were taken from (`read_header`, `read_checkpoint`):
            the file is checked to be the one it was read from, as `open_file` checks it.
        **transport: How a URL or an object store is reached (`Transport`): ``timeout``
            bounds the whole call (none by default, so that a large download is not cut
            short: each wait still ends after 10 s); of ``max_workers`` requests in flight
            at once, the first is sent alone when the file is not open yet (it follows
            redirects and learns the file's size and ETag); a local file's long read is
            spread over at most ``max_workers`` cores.

    Returns:
        One ``memoryview`` (format ``"B"``, one dimension) per range, of exactly its length.
        It is writable unless the source's memory is read-only (``bytes``, obstore's
        buffers).

    Raises:
        HeaderError: ``MetadataIncompleteBuffer``: the file ends before a range does (known
            before any request when the file's size is); ``FileChanged``: the file changed
            while it was read, or is not the one `header` was read from.
        RemoteError: As for `read_header`.
        OSError: The file could not be opened or read.
        TypeError: `source` is none of the above, or a range is not a pair of ints, or
            `into` holds something that is not a writable buffer.
        ValueError: A negative offset or length; a buffer of `into` of the wrong length; a
            file object or a path that cannot seek (a pipe); an option out of range.
    """
    options = Options.given("read_ranges", transport, timeout=None, gap=gap)
    if isinstance(source, SafetensorsFile):
        return source.read_ranges(ranges, gap=gap, into=into, timeout=options.timeout)
    wanted = [_checked(item) for item in ranges]
    buffers = None if into is None else _buffers(into, wanted)
    # (A TypeError for a source of no kind, even with nothing to read.)
    file = open_source(source, options.replace(timeout=None))
    if not any(length for _, length in wanted):
        return [memoryview(b"") for _ in wanted] if buffers is None else buffers
    clock = options.clock()
    if header is not None:
        file.confirm(header, clock)
    refuse_a_stream(file)
    return file.read_ranges(wanted, clock, gap=gap, into=buffers)


def read_tensor(
    source: Source | Checkpoint,
    tensor: str | TensorInfo,
    /,
    key: object = None,
    *,
    into: Any = None,
    gap: int | None = None,
    **transport: Unpack[Transport],
) -> memoryview:
    """The bytes of one tensor, or of ``tensor[key]``, read from `source`.

    Args:
        source: The file the tensor is in, as `read_ranges` takes it (a `SafetensorsFile`
            checks that it is still the file its header came from), or a `Checkpoint`
            (the tensor is read from its shard).
        tensor: Its `TensorInfo` (from this very file's header), or its name (then the
            header is read first, unless `source` is a `SafetensorsFile` or a
            `Checkpoint`).
        key: numpy basic indexing (ints, slices with any step, ``...``, or a tuple of them,
            e.g. ``numpy.s_[:, 128:256]``): only the bytes of ``tensor[key]`` are read, in
            as few requests as `gap` allows (see `TensorInfo.byte_ranges`).
        into: A writable buffer of exactly the selection's bytes, to read into.
        gap, **transport: As for `read_ranges`.

    Returns:
        The bytes, little-endian, in C order, as one ``memoryview``.

    Raises:
        HeaderError: As `read_ranges` (and `RemoteError`, `OSError`).
        KeyError: A name that is not there.
        IndexError: A key, as `TensorInfo.byte_ranges` raises it (also `TypeError` and
            `ValueError`).
    """
    options = Options.given("read_tensor", transport, timeout=None, gap=gap)
    shards = getattr(source, "shards", None)
    if shards is not None:  # a Checkpoint
        name = tensor if isinstance(tensor, str) else tensor.name
        source = shards[source.weight_map[name]]  # type: ignore[union-attr]
    file: RangeFile
    if isinstance(tensor, str):
        opened_file = source if isinstance(source, SafetensorsFile) else opened(source, options)  # type: ignore[arg-type]
        info, file = opened_file.header.tensors[tensor], opened_file._range_file
    else:
        info = tensor
        file = open_source(source, options.replace(timeout=None))
        refuse_a_stream(file)
    return _tensor_bytes(file, info, key, into, options.clock())


def _tensor_bytes(
    file: RangeFile, info: TensorInfo, key: object, into: Any, clock: Clock
) -> memoryview:
    ranges = [(info.start, info.nbytes)] if key is None else info.byte_ranges(key)
    total = sum(length for _, length in ranges)
    if into is None:
        if len(ranges) == 1:
            return file.read_ranges(ranges, clock)[0]
        target = allocate(total)
    else:
        target = _buffers([into], [(0, total)])[0]
    # Each range straight into its place in the one buffer: no join.
    views, at = [], 0
    for _, length in ranges:
        views.append(target[at : at + length])
        at += length
    if ranges:
        file.read_ranges(ranges, clock, into=views)
    return target


def _read(
    file: RangeFile,
    ranges: Iterable[tuple[int, int]],
    gap: int | None,
    into: Sequence[Any] | None,
    clock: Clock,
) -> list[memoryview]:
    wanted = [_checked(item) for item in ranges]
    buffers = None if into is None else _buffers(into, wanted)
    if not any(length for _, length in wanted):
        return [memoryview(b"") for _ in wanted] if buffers is None else buffers
    return file.read_ranges(wanted, clock, gap=gap, into=buffers)


def read_planned(file: SafetensorsFile, reads: list[Read], clock: Clock) -> None:
    """The requests of a read plan, as they are, into their segments (`_plan`)."""
    _read_planned(file._range_file, reads, clock)


def _checked(item: tuple[int, int]) -> tuple[int, int]:
    try:
        offset, length = item
        offset, length = operator.index(offset), operator.index(length)
    except (TypeError, ValueError):
        raise TypeError(f"a range is an (offset, length) pair of ints, not {item!r:.80}") from None
    if offset < 0 or length < 0:
        raise ValueError(f"a range's offset and length must be 0 or more, not {item!r}")
    return offset, length


def _buffers(into: Sequence[Any], wanted: list[tuple[int, int]]) -> list[memoryview]:
    """The caller's buffers as flat writable byte views, one per range, each of its length."""
    if len(into) != len(wanted):
        raise ValueError(f"into has {len(into)} buffers for {len(wanted)} ranges")
    views = []
    for index, (buffer, (_, length)) in enumerate(zip(into, wanted, strict=True)):
        try:
            view = memoryview(buffer)
        except (TypeError, ValueError):
            try:  # an array of a dtype the buffer protocol has no code for (ml_dtypes')
                view = memoryview(buffer.view("u1"))
            except Exception:
                raise TypeError(
                    f"into[{index}] is a {type(buffer).__name__}, not a writable buffer"
                ) from None
        if view.readonly:
            raise TypeError(f"into[{index}] is read-only")
        if not view.c_contiguous:
            raise ValueError(f"into[{index}] is not contiguous")
        view = view.cast("B") if view.ndim != 1 or view.format != "B" else view
        if view.nbytes != length:
            raise ValueError(
                f"into[{index}] holds {view.nbytes:,} bytes, the range {length:,}: they must "
                "be equal"
            )
        views.append(view)
    return views


# Where users find it (help(), reprs, pickles by reference): the package's top level.
publish(SafetensorsFile)


def chosen_tensors(header: Header, names: Iterable[str] | None) -> list[TensorInfo]:
    """The entries of `names` in `header` (all of them: None), in the order given; KeyError
    for a name it does not hold. The loaders' one way to choose tensors."""
    if names is None:
        return list(header.tensors.values())
    if isinstance(names, str):
        raise TypeError("names must be an iterable of tensor names, not a str")
    chosen = []
    for name in names:
        info = header.tensors.get(name)
        if info is None:
            raise KeyError(f"no tensor {name!r} in the file")
        chosen.append(info)
    return chosen
