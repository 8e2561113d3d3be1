"""Local paths as a `RangeFile` backend.

Layer: sources. A path is read with ``os.preadv`` straight into the memory the bytes are
returned in (no shared file position, so any number of threads may read one file; a long
read is split over the machine's cores). Every read is identified by an ``os.fstat`` of the
descriptor read (device, inode, size, modification and change times: `RangeFile._identify`),
so a file rewritten or replaced between two reads is the one ``FileChanged`` error, never a
mix of two files. A pipe, a FIFO or a character device is read as a stream (`streams.StreamFile`).
"""

from __future__ import annotations

import errno
import functools
import os
import stat

from .._core.header import set_identity
from .._core.parse import FILE_FIRST_READ, parse_file_start, parse_header
from .._errors import HeaderError
from .base import RangeFile, ShortRead, header_of
from .identity import absolute, make_identity, same_path
from .options import LOCAL_GAP
from .planning import cut
from .streams import STREAM_CHUNK, StreamFile, read_at_most, stat_validators
from .threads import run_parallel

__all__ = ["INDEX_NAMES", "SINGLE_NAMES", "PathFile", "directory_entry", "header_at"]
__all__ += ["mode_kind", "no_entry", "read_path"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import mmap
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Final, NoReturn

    from .._core.header import Header
    from .identity import FileIdentity
    from .options import Clock, Options
    from .planning import Read

#: Index file names looked for in a directory, in this order.
INDEX_NAMES: Final = (
    "model.safetensors.index.json",
    "diffusion_pytorch_model.safetensors.index.json",
)
#: Single-file checkpoint names looked for in a directory, after the index names.
SINGLE_NAMES: Final = ("model.safetensors", "diffusion_pytorch_model.safetensors")
# Opening a checkpoint's file: O_NONBLOCK so that a FIFO does not wait for a writer (it is
# then refused as not a regular file); O_NOFOLLOW on the resolved path, which has no links
# left to follow.
_CONTAINED_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
)
_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
# A local read at least this long is split over the cores, in parts of `_PART` bytes (the
# copy out of the page cache, and the page faults of fresh memory, scale with them).
_PARALLEL: Final = 32 << 20
_PART: Final = 8 << 20
_IOV_MAX: Final = 1024  # buffers per preadv call (POSIX's minimum IOV_MAX is 16; Linux's 1024)
_pread: Callable[[int, int, int], bytes] | None = getattr(os, "pread", None)


def read_path(path: str | os.PathLike[str] | os.PathLike[bytes], limit: int) -> Header:
    """A local file's header: a regular file's from its first read (one ``open``, one
    ``fstat``, one ``read`` and one ``close`` for most headers), anything else's as `PathFile`
    reads it."""
    # The descriptor itself (no file object: a tenth of a small header's time).
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        status = os.fstat(descriptor)
        if stat.S_ISREG(status.st_mode):
            # `header_at`'s first read, inline: the common case touches as little code as it
            # can (a small header's read is mostly what it fetches back into the caches).
            size = status.st_size
            first = size if size < FILE_FIRST_READ else FILE_FIRST_READ
            parsed = parse_file_start(os.read(descriptor, first), size, limit)
            header = None
            if not isinstance(parsed, int):
                header = parsed
            elif _pread is not None:  # `parsed` is a longer header's whole length
                whole = _pread(descriptor, parsed, 0)
                if len(whole) == parsed:
                    header = parse_header(whole, file_size=size, max_header_size=limit)
            if header is not None:
                set_identity(header, _path_identity(path, status))
                return header
        elif stat.S_ISFIFO(status.st_mode) or stat.S_ISCHR(status.st_mode):
            # A pipe is read from this very descriptor: opened again, it would wait for a
            # writer that may have written and gone (its bytes with the first reader).
            from .options import Clock, Options

            stream = open(descriptor, "rb", buffering=0, closefd=True)  # noqa: SIM115
            descriptor = -1  # (the stream closes it)
            with stream:
                file = StreamFile(stream, Options(), shown=os.fsdecode(path))
                return header_of(file, limit, Clock(None))
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    from .options import Clock, Options

    # A longer header cut meanwhile, a block device: the general loop.
    return header_of(PathFile(path, Options()), limit, Clock(None))


def _path_identity(
    path: str | os.PathLike[str] | os.PathLike[bytes], status: os.stat_result
) -> FileIdentity:
    """The identity of the file at `path`, as `status` (its ``fstat``) says: its place the
    absolute path (a relative one is the working directory's now, not when it is compared)."""
    return make_identity(absolute(path), status.st_size, stat_validators(status), None)


def header_at(descriptor: int, size: int, limit: int) -> Header | None:
    """The header of the regular file open as `descriptor` (of `size` bytes), read from
    offset 0 in one read (two for a header over 16 KiB); None if the file was cut short
    meanwhile (read it as a stream). Raises what the bytes decide."""
    if _pread is not None:
        ahead = _pread(descriptor, min(size, FILE_FIRST_READ), 0)
    else:  # (Windows)
        os.lseek(descriptor, 0, os.SEEK_SET)
        ahead = os.read(descriptor, min(size, FILE_FIRST_READ))
    parsed = parse_file_start(ahead, size, limit)
    if not isinstance(parsed, int):
        return parsed
    if _pread is None:
        return None
    # The rest of a longer header: the whole of it read again in one call, rather than the
    # rest read and joined (a copy more).
    whole = _pread(descriptor, parsed, 0)
    if len(whole) == parsed:
        return parse_header(whole, file_size=size, max_header_size=limit)
    return None


class PathFile(RangeFile):
    """A local file by its path; reopened, and checked to be the same file, at every read.

    A regular file (or a block device) is read with ``os.preadv`` at any offset; anything
    else (a pipe, a FIFO, ``/dev/stdin``) as a stream, from where it is, once.
    """

    default_gap = LOCAL_GAP

    def __init__(
        self,
        path: str | os.PathLike[str] | os.PathLike[bytes],
        options: Options,
        *,
        shown: str | None = None,
        flags: int = _OPEN_FLAGS,
        refuse: Callable[[int], NoReturn] | None = None,
    ) -> None:
        super().__init__(options, os.fsdecode(path) if shown is None else shown)
        self.path = path
        self.flags = flags
        # Called with the mode of a file that is not a regular file, to raise instead.
        self.refuse = refuse
        self.seekable = True
        self._stream: StreamFile | None = None  # a pipe's reader, kept: it is read once
        # A checkpoint's file: the resolved folders its siblings must resolve into, and the
        # file that named it (for messages); None for a file read on its own.
        self.roots: tuple[str, ...] | None = None
        self.index = self.shown
        self._folder: tuple[str, str, bool] | None = None  # (`_plain_folder`)

    @property
    def name(self) -> str:
        return os.path.basename(self.shown)

    def candidates(self, *, follow_links: bool = False) -> list[RangeFile]:
        """A directory: the first of `INDEX_NAMES` and `SINGLE_NAMES` in it, kept inside
        it; an index: itself, its shards kept inside its directory; else itself."""
        shown = self.shown
        if os.path.isdir(self.path):
            picked, names = directory_entry(shown)
            if picked is None:
                raise no_entry(shown, names)
            roots = None if follow_links else _roots(os.fsdecode(self.path))
            where = os.path.join(shown, picked)
            file = _contained(where, f"{picked!r} in the directory", shown, roots, self.options)
            file.index = where  # (its shards are named by it)
            return [file]
        if not shown.endswith(".json"):
            return [self]
        self.roots = () if follow_links else _roots(os.path.dirname(os.fsdecode(self.path)))
        self._folder = None  # (judged against these roots)
        return [self]

    @property
    def local_path(self) -> str | None:
        self._prepare()
        return os.fsdecode(self.path) if self.seekable else None

    @property
    def _place(self) -> str:
        """The absolute path (`absolute`)."""
        return absolute(self.path)

    def _same_place(self, location: str) -> bool:
        """The same path, however spelled (``./m``, absolute, through links): both resolved
        now. (The same device and inode is the same file too: `RangeFile._identify`.)"""
        return same_path(location, self._place)

    def __getstate__(self) -> dict[str, Any]:
        # The resolved folder is worked out again where the file is unpickled.
        return {**self.__dict__, "_stream": None, "_folder": None}

    def open_checked(self) -> int:
        """A new descriptor of the file, checked to be the file first read (its identity,
        pinned by the first call); the caller closes it."""
        try:
            descriptor = os.open(self.path, self.flags)
        except OSError as error:
            if self.shown == os.fsdecode(self.path):
                raise
            # Named as the caller knows it (a shard as its index names it, not as resolved).
            raise OSError(error.errno, error.strerror, self.shown) from None
        try:
            status = os.fstat(descriptor)
            mode = status.st_mode
            if not stat.S_ISREG(mode) and self.refuse is not None:
                self.refuse(mode)
            if stat.S_ISDIR(mode):  # (opened, on POSIX: refused here, by its name)
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.shown)
            if stat.S_ISBLK(mode):  # a block device: its size is where seeking ends
                size: int | None = os.lseek(descriptor, 0, os.SEEK_END)
            elif stat.S_ISREG(mode):
                size = status.st_size
            else:
                size = None  # a stream
            if not self.identified:
                self.seekable = size is not None
            self._identify(size, stat_validators(status))
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor

    def _seekable_descriptor(self) -> int | None:
        """A new descriptor of the file, checked (`open_checked`: it learns the size and
        whether the file can seek), for the caller to close; None for a pipe, whose stream is
        kept and read, in order, from the one descriptor opened (opened again, it would wait
        for a writer that may be gone)."""
        if self.identified and not self.seekable:
            return None  # a pipe kept open already
        descriptor = self.open_checked()
        if self.seekable:
            return descriptor
        self._keep_stream(descriptor)
        return None

    def _quick_header(self, max_header_size: int) -> Header | None:
        descriptor = self._seekable_descriptor()
        if descriptor is None:
            return None  # a pipe: read as a stream
        try:
            header = header_at(descriptor, self.size or 0, max_header_size)
            if header is None:
                return None
            status = os.fstat(descriptor)  # (rewritten while it was read: not this header)
            self._identify(status.st_size, stat_validators(status))
        finally:
            os.close(descriptor)
        set_identity(header, make_identity(self._place, self.size, self.validators or (), None))
        return header

    def _map(
        self, header: Header | None, max_header_size: int, copy: bool
    ) -> tuple[Header, mmap.mmap] | None:
        import mmap

        from .options import Clock

        given = header
        if given is not None:
            self._expect(given)
        descriptor = self._seekable_descriptor()  # (checked against the header's identity)
        if descriptor is None:
            return None  # a pipe: read as a stream
        try:
            size = self.size or 0
            if not size:
                return None  # (the data path says what is wrong with an empty file)
            if header is None:
                header = header_at(descriptor, size, max_header_size) or header_of(
                    self, max_header_size, Clock(None)
                )
            # Mapped from the descriptor the header was read through: the same file.
            access = mmap.ACCESS_COPY if copy else mmap.ACCESS_READ
            mapped = mmap.mmap(descriptor, size, access=access)
        finally:
            os.close(descriptor)
        if given is not None and self._needs_header_bytes(given):
            # A header of a copy elsewhere: held to its bytes, as `confirm` holds it.
            try:
                self._check_header_bytes(given, mapped[: given.data_start])
            except HeaderError:
                mapped.close()
                raise
        return header, mapped

    def _prepare(self) -> None:
        if not self.identified:
            descriptor = self._seekable_descriptor()
            if descriptor is not None:
                os.close(descriptor)

    def _can_seek(self) -> bool:
        self._prepare()
        return self.seekable

    def _first_read_size(self) -> int:
        self._prepare()
        if not self.seekable:
            return 8  # a stream: exactly the bytes of the header, the data left in it
        return min(self.size or 0, FILE_FIRST_READ)

    def _first(self, count: int, clock: Clock) -> bytes:
        return self.read(0, count, clock)

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        if not self.seekable:
            return self._streamed().read(start, stop, clock)
        return super().read(start, stop, clock)

    def _streamed(self) -> StreamFile:
        if self._stream is None:
            self._keep_stream(self.open_checked())
        assert self._stream is not None
        return self._stream

    def _keep_stream(self, descriptor: int) -> None:
        # Kept open between reads (a pipe is read once, in order, from one descriptor: opened
        # again it would wait for a writer that may be gone); closed by close().
        stream = open(descriptor, "rb", buffering=0, closefd=True)  # noqa: SIM115
        self._stream = StreamFile(stream, self.options, shown=self.shown)

    def _read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        if not self.seekable:
            if self._stream is None:
                raise ValueError(
                    f"reading ranges needs a file it can seek in; {self.shown!r} is a stream "
                    "(read it in order with read_header or open_file, or copy it to a file)"
                )
            self._stream._read_into(reads, clock)
            return
        reads = list(reads)
        descriptor = self.open_checked()
        try:
            total = sum(stop - start for start, stop, _ in reads)
            if total >= _PARALLEL and self.options.max_workers > 1 and _preadv is not None:
                workers = min(self.options.max_workers, os.cpu_count() or 1)
                run_parallel(lambda read: _read_at(descriptor, read), cut(reads, _PART), workers)
            else:
                for read in reads:
                    _read_at(descriptor, read)
            # Rewritten while it was read: the bytes may be a mix.
            status = os.fstat(descriptor)
            size = status.st_size if stat.S_ISREG(status.st_mode) else self.size
            self._identify(size, stat_validators(status))
        finally:
            os.close(descriptor)

    def document(self, limit: int, clock: Clock) -> bytes:
        descriptor = self.open_checked()
        with open(descriptor, "rb", buffering=0, closefd=True) as file:
            return read_at_most(file.read, limit + 1)

    def sibling(self, name: str) -> PathFile:
        """The file `name` beside this one; a checkpoint's (`candidates`) is resolved once,
        inside the checkpoint's directory (unless links may lead out), opened without
        following links, and only if it is a regular file."""
        if self.roots is None:
            return PathFile(_beside(self.shown, name), self.options)
        roots = self.roots or None
        label = f"shard {name!r}"
        if not _plain_name(name):
            return _contained(_beside(self.shown, name), label, self.index, roots, self.options)
        prefix, real_prefix, inside = self._plain_folder()
        joined = real_prefix + name
        try:  # a link is resolved as any other path
            real = None if stat.S_ISLNK(os.lstat(joined).st_mode) else joined
        except OSError:  # (missing: realpath and the open say so as for any other name)
            real = None
        return _contained(prefix + name, label, self.index, roots, self.options, real, inside)

    def _plain_folder(self) -> tuple[str, str, bool]:
        """For a plain name beside this file (no separator, not a link): the path its name
        is joined to, as shown and resolved, and whether the resolved folder is inside the
        roots. Worked out once a checkpoint (`candidates` forgets it): its shards share
        them, and the resolved name is then one ``lstat`` away, where ``realpath`` takes
        one a path component."""
        folder = self._folder
        if folder is None:
            shown = os.path.dirname(self.shown)
            prefix = os.path.join(shown, "")
            real_prefix = os.path.join(os.path.realpath(shown or "."), "")
            inside = not self.roots or _inside(real_prefix, self.roots)
            folder = self._folder = (prefix, real_prefix, inside)
        return folder

    def close(self) -> None:
        if self._stream is not None:
            self._stream.stream.close()
            self._stream = None


def _contained(  # noqa: PLR0917 - the file, its names, its roots, and its path
    path: str,
    name: str,
    where: str,
    roots: tuple[str, ...] | None,
    options: Options,
    real: str | None = None,
    inside: bool = False,
) -> PathFile:
    """`path` as a checkpoint's file: resolved inside `roots` (unless None), and read only
    if a regular file. Resolved once, and the resolved path opened without following
    links at every read, so the file checked is the file read. Nothing is read before both
    checks; `name` and `where` (the index) name it in the errors; `real` is `path`
    resolved, where the caller knows it, and `inside` True where it knows that to be inside
    `roots`."""
    if real is None:
        real, inside = os.path.realpath(path), False
    if roots is not None and not (inside or _inside(real, roots)):
        raise _bad_index(
            where,
            f"{name} leads out of the checkpoint's directory through a symbolic link "
            "(follow_links=True reads it)",
        )

    refuse = functools.partial(_refuse, where, name)
    # Named as the index names it, not as resolved (the resolved path is an internal).
    file = PathFile(real, options, shown=path, flags=_CONTAINED_FLAGS, refuse=refuse)
    file.roots, file.index = roots or (), where
    return file


def _refuse(where: str, name: str, mode: int) -> NoReturn:
    raise _bad_index(where, f"{name} is not a regular file but {mode_kind(mode)}")


def _bad_index(where: str, problem: str) -> HeaderError:
    return HeaderError("InvalidIndex", f"{where}: {problem}")


def _beside(path: str, name: str) -> str:
    """The path of the file `name` beside the local file at `path` (a local path that
    reads like a URL is a path all the same: no quoting)."""
    return os.path.join(os.path.dirname(path), name)


def _plain_name(name: str) -> bool:
    """Whether a shard's name is a plain file name, joined to its folder as it is."""
    return os.sep == "/" and "/" not in name and name not in {"", ".", ".."}


def _roots(folder: str) -> tuple[str, ...]:
    """The resolved directories that a checkpoint's local files may resolve into.

    The folder itself; and for a Hugging Face cache snapshot (``<repo>/snapshots/<rev>/``,
    whose files are links to ``../../blobs/<hash>``), its repository's ``blobs/``.

    The ``blobs`` folder counts only as a folder of the repository, not as a link to
    elsewhere: a snapshot-shaped folder whose ``blobs`` leads to ``/`` would let its links
    reach any file.
    """
    real = os.path.realpath(folder)
    snapshots = os.path.dirname(real)
    if os.path.basename(snapshots) != "snapshots":
        return (real,)
    blobs = os.path.join(os.path.dirname(snapshots), "blobs")
    resolved = os.path.normcase(os.path.realpath(blobs))
    return (real, blobs) if resolved == os.path.normcase(blobs) else (real,)


def _inside(real: str, roots: tuple[str, ...]) -> bool:
    """Whether a resolved path is below one of the resolved roots."""
    path = os.path.normcase(real)
    return any(path.startswith(os.path.join(os.path.normcase(root), "")) for root in roots)


def directory_entry(folder: str | os.PathLike[str]) -> tuple[str | None, list[str]]:
    """What a checkpoint's directory is read as, and what else the directory holds.

    Returns the first of `INDEX_NAMES`, then of `SINGLE_NAMES`, that is a file there
    (``None`` when none is), and the names of everything in the directory, sorted.
    """
    with os.scandir(folder) as entries:
        found = {entry.name: _is_file(entry) for entry in entries}
    names = (*INDEX_NAMES, *SINGLE_NAMES)
    return next((name for name in names if found.get(name)), None), sorted(found)


def _is_file(entry: os.DirEntry[str]) -> bool:
    """Whether a directory entry is a file, or a link to one; False where that cannot be
    told (a loop of links, a folder it may not look into): not what the directory is
    read as."""
    try:
        return entry.is_file()
    except OSError:
        return False


def no_entry(folder: str | os.PathLike[str], names: list[str]) -> FileNotFoundError:
    """The error for a directory that holds no checkpoint: what it holds instead."""
    from .._core.diagnose import listed

    wanted = f"no {SINGLE_NAMES[0]} or {INDEX_NAMES[0]} (nor the diffusers names) in the directory"
    odd = [name for name in (*INDEX_NAMES, *SINGLE_NAMES) if name in names]
    if odd:  # there, but not a file: a FIFO, a directory, a broken link...
        return FileNotFoundError(
            errno.ENOENT, f"{odd[0]} in the directory is not a regular file", os.fspath(folder)
        )
    indexes = [name for name in names if name.endswith(".safetensors.index.json")]
    files = [name for name in names if name.endswith(".safetensors")]
    if indexes:
        problem = f"{wanted}; it holds the index {listed(indexes)}"
    elif files:
        count = f"{len(files):,} safetensors file{'' if len(files) == 1 else 's'}"
        problem = f"{wanted}; it holds {count}: {listed(files)}"
    else:
        held = f"it holds {listed(names)}" if names else "it is empty"
        problem = (
            f"no safetensors file in the directory ({held}): a checkpoint directory holds "
            f"{SINGLE_NAMES[0]} or {INDEX_NAMES[0]}"
        )
    return FileNotFoundError(errno.ENOENT, problem, os.fspath(folder))


def _read_at(descriptor: int, read: Read) -> None:
    """Bytes ``[start, stop)`` of a file into their segments; the bytes between them into
    scratch space. `ShortRead` where the file ends first."""
    start, stop, segments = read
    buffers: list[memoryview] = []
    at = start
    for offset, view in segments:
        if offset > at:
            buffers.append(memoryview(bytearray(offset - at)))
        buffers.append(view)
        at = offset + len(view)
    if stop > at:
        buffers.append(memoryview(bytearray(stop - at)))
    position = start
    index = 0
    while index < len(buffers):
        batch = buffers[index : index + _IOV_MAX]
        if _preadv is not None:
            count = _preadv(descriptor, batch, position)
        else:
            count = _read_one(descriptor, batch[0], position)
        if count == 0:
            raise ShortRead(position)
        position += count
        # Drop the buffers filled; cut the one filled in part.
        while count and index < len(buffers):
            size = len(buffers[index])
            if count >= size:
                count -= size
                index += 1
            else:
                buffers[index] = buffers[index][count:]
                count = 0


_preadv: Callable[[int, Sequence[memoryview], int], int] | None = getattr(os, "preadv", None)


def _read_one(descriptor: int, view: memoryview, position: int) -> int:
    """One read at `position` where there is no preadv: pread and a copy, or (Windows: one
    descriptor per call, so the position is not shared) a seek and a readinto."""
    if _pread is not None:
        data = _pread(descriptor, min(len(view), STREAM_CHUNK), position)
        view[: len(data)] = data
        return len(data)
    os.lseek(descriptor, position, os.SEEK_SET)
    with open(descriptor, "rb", buffering=0, closefd=False) as file:
        return file.readinto(view[:STREAM_CHUNK]) or 0


def mode_kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, for a message: "a FIFO (named pipe)", ..."""
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a file"
