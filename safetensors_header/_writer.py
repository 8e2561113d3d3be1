"""Writing headers and files, byte for byte as the reference writes them.

Layer: services (the encoder is pure; writing files uses the source layer to read).

The layout is the reference's (``prepare`` and ``impl Serialize for Metadata`` in
``safetensors/src/tensor.rs``; docs/format.md §7): tensors ordered by dtype, largest
enum value first, then by name; data offsets packed from 0; compact JSON with
``__metadata__`` first; spaces up to a multiple of 8 bytes.

The format's rules are not re-implemented here: the arguments are checked for type and range
(so that messages speak of them), then every header is checked by `parse_header` before a byte
reaches the disk, so that a writer error has the kind the reader would give the file.
Two reference bugs are avoided: ``serialize({}, metadata={})`` writes
``{},"__metadata__":{}}`` and a tensor named ``__metadata__`` is written as metadata; no reader
opens either file.
"""

from __future__ import annotations

import binascii
import contextlib
import errno
import json
import os
import pickle
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import index
from typing import TYPE_CHECKING, BinaryIO, Final, TypeGuard

from ._diagnose import TORN_PREFIX
from ._errors import HeaderError
from ._format import DTYPE_BITS, HEADER_LENGTH_SIZE, MAX_HEADER_SIZE, METADATA_KEY, U64_MAX
from ._local import mode_kind
from ._parser import parse_header
from ._sources import read_header

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, StrPath

    from ._header import Header

__all__ = ["encode_header", "update_metadata", "write_file"]

_ALIGNMENT: Final = 8  # the reference pads the header with spaces to a multiple of 8
_COPY_CHUNK = 16 * 2**20  # bytes per read when copying a data buffer into a new file
# The reference's writer refuses headers its reader would refuse (HeaderTooLarge); a name of
# its own so that tests can lower it.
_MAX_HEADER_SIZE = MAX_HEADER_SIZE
# Sort key: the reference sorts by `Dtype` descending (its derived Ord is the enum order,
# which is DTYPE_BITS' order), then by name. Rust compares names as UTF-8 bytes, which is
# code-point order, Python's str order.
_DTYPE_RANK: Final = {dtype: -rank for rank, dtype in enumerate(DTYPE_BITS)}

# On Windows, where an open file cannot be deleted and no lock is taken, a temporary file
# changed less than this long ago may be a live writer's, between its close and its rename.
_FRESH_SECONDS: Final = 60.0
_CREATE_ATTEMPTS: Final = 10  # temporary files a concurrent clean-up may take for stale
_HEX_DIGITS: Final = frozenset("0123456789abcdef")  # what bytes.hex() writes

_Row = tuple[str, str, tuple[int, ...], int, int]  # name, dtype, shape, begin, end


def encode_header(
    tensors: Mapping[str, tuple[str, Sequence[int]]],
    /,
    *,
    metadata: Mapping[str, str] | None = None,
) -> bytes:
    """The first ``8 + N`` bytes of the safetensors file that holds these tensors.

    Args:
        tensors: Tensor name -> ``(dtype, shape)``: ``dtype`` a key of ``DTYPE_BITS`` (e.g.
            ``"BF16"``), ``shape`` the dimensions as the header records them (element counts,
            so an ``F4`` tensor of 6 values has shape ``[6]``, 3 bytes).
        metadata: The ``__metadata__`` map, written first; ``{}`` is written as an empty map,
            ``None`` writes none. Keys are written in the mapping's order (the reference's
            order is random when there are two or more).

    Returns:
        The 8-byte little-endian length N and the N bytes of padded JSON, exactly as the
        reference (``safetensors.serialize``) lays them out. The data buffer that follows is
        the tensors' bytes in the header's order. To learn that order and every tensor's
        offsets, parse the result: ``parse_header(encoded).tensors`` is in data order, with
        ``start``/``end`` (absolute file offsets), ``nbytes`` and ``data_offsets``.

    Raises:
        HeaderError: The file could not be read back; ``kind`` is what the reader would
            report: ``InvalidHeaderDeserialization`` (unknown dtype, a dimension outside
            0..2^64-1, a tensor named ``__metadata__``), ``InvalidHeader`` (a lone surrogate,
            which UTF-8 cannot hold), ``ValidationOverflow``, ``MisalignedSlice`` (e.g.
            ``F4`` with an odd element count), ``HeaderTooLarge`` (N above 10^8).
        TypeError: An argument of the wrong Python type (names, dtypes, metadata keys and
            values must be ``str``; dimensions integers).
    """
    specs = [_spec(name, value, arity=2) for name, value in _items(tensors)]
    rows = _laid_out([(name, dtype, dims, _nbytes(dtype, dims)) for name, dtype, dims, _ in specs])
    encoded = _frame(_json(rows, _checked_metadata(metadata)))
    _validated(encoded, rows)
    return encoded


def write_file(
    path: StrPath,
    tensors: Mapping[str, tuple[str, Sequence[int], ReadableBuffer]],
    /,
    *,
    metadata: Mapping[str, str] | None = None,
) -> Header:
    """Write a safetensors file, byte for byte what the reference writes.

    Args:
        path: Where to write. An existing file is replaced (through a symbolic link, the
            file it points to), keeping its permission bits; a new one gets the usual
            ``0o666 & ~umask``.
        tensors: Tensor name -> ``(dtype, shape, data)``: ``dtype`` and ``shape`` as for
            `encode_header`; ``data`` any C-contiguous bytes-like object (``bytes``,
            ``bytearray``, ``memoryview``, a numpy array, ``array.array``...) holding the
            tensor's little-endian bytes, exactly dtype size x element count of them.
        metadata: As for `encode_header`.

    Every size is checked before anything is written. The data is then streamed buffer by
    buffer, in the header's order and without copies, into a temporary file in the same
    directory, ``.<name>.<16 hex digits>.tmp``, which is flushed to disk and renamed over
    ``path``: a failure at any point leaves ``path`` as it was and no temporary file behind.
    A process killed meanwhile leaves ``path`` as it was and its temporary file, which the
    next `write_file` or rewriting `update_metadata` of the same ``path`` removes: only files
    of that name whose random part carries this module's checksum, and that no live writer
    holds (a writer locks its file until the rename; on Windows, where an open file cannot be
    deleted, only files left unchanged for a minute).

    Returns:
        The file's `Header`, as `read_header` would return it.

    Raises:
        HeaderError: As for `encode_header`, and ``TensorInvalidInfo`` when a buffer's length
            is not what its dtype and shape need. Nothing has been written.
        TypeError: As for `encode_header`; also a buffer that is not bytes-like, not
            C-contiguous, or explicitly big-endian (byte-swap it first).
        OSError: The file could not be written (``path`` is then unchanged).
    """
    with contextlib.ExitStack() as views:
        specs = [_spec(name, value, arity=3) for name, value in _items(tensors)]
        entries = [
            (name, dtype, dims, views.enter_context(_flat_view(name, data)))
            for name, dtype, dims, data in specs
        ]
        # Like the reference, lay the buffers out by their own lengths: the reader's checks
        # on the header then report any buffer whose length disagrees with dtype x shape.
        rows = _laid_out([(name, dtype, dims, view.nbytes) for name, dtype, dims, view in entries])
        encoded = _frame(_json(rows, _checked_metadata(metadata)))
        try:
            header = _validated(encoded, rows)
        except HeaderError as error:
            raise _buffer_error(error, entries) from None
        order = sorted(entries, key=_order)
        target = os.path.realpath(path)
        with _replacing(target, mode=_mode_of(target)) as file:
            _write_all(file, encoded)
            for _, _, _, view in order:
                _write_all(file, view)
    return header


def update_metadata(
    path: StrPath, /, metadata: Mapping[str, str] | None, *, in_place: bool = False
) -> Header:
    """Replace a file's ``__metadata__``; the tensors' bytes never change.

    Args:
        path: A safetensors file (through a symbolic link, the file it points to): a regular
            file (a FIFO, a device or a directory is refused before it is opened). It is
            validated with `read_header` first.
        metadata: The new ``__metadata__`` map; ``{}`` writes an empty map, ``None`` removes
            it. Keys are written in the mapping's order.
        in_place: By default (``False``) a new file is written with the reference's layout
            and renamed over ``path``, the data buffer copied in chunks: safe while other
            processes read or update the file (a reader that has it open keeps reading the
            old file whole; of two updaters, one result stays, never a mix). ``True``: when
            the new header fits in the old one's N bytes, overwrite just the header, padded
            with spaces to the old length, so that the data does not move (the header may
            then end in more than 7 spaces, which every reader accepts). Only for a file
            nobody else has open: a reader reading meanwhile can get half the old header and
            half the new one, which every reader (this one and the reference) accepts; no
            lock helps against readers that take none.

    Failures: validation errors come before any write. The default never tears: the original
    stays in place until the fully written and synced new file is atomically renamed over it
    (which gives the file a new inode, breaks hard links and needs a writable directory;
    permission bits are kept). The temporary file is ``.<name>.<16 hex digits>.tmp`` next to
    the file; one left by a killed process is removed by the next rewrite of the same file
    (see `write_file`). In place, the header is rewritten in three synced steps: the 8-byte
    length prefix is replaced by a marker (``TORN-HDR``), the header's N bytes are written,
    then the real prefix. A process stopped at any moment (``SIGKILL``, ``SIGTERM``, a crash)
    or a power loss leaves the old header, the new one, or a file that every reader rejects
    (``HeaderTooLarge``) and that `read_header` says is torn (``HeaderError.hint``); never a
    mix of the two that reads as valid. The data is never touched. If a write raises, the old
    header is written back before the error propagates. In place needs write permission on
    the file.

    Returns:
        The new `Header`, as `read_header` would return it.

    Raises:
        HeaderError: The file is not a valid safetensors file, or the new header would not
            be valid (see `encode_header`). Nothing has been written.
        TypeError: ``metadata`` is not a mapping of ``str`` to ``str`` (or ``None``).
        OSError: The file could not be read or written; it is then unchanged.
    """
    new_metadata = _checked_metadata(metadata)
    target = os.path.realpath(path)
    with _open_regular(target, writable=in_place) as file:
        old = read_header(file)
        rows = [(t.name, t.dtype, t.shape, *t.data_offsets) for t in old.tensors.values()]
        body = _json(rows, new_metadata)
        if in_place and len(body) <= old.header_size:
            encoded = _frame(body, old.header_size)
            header = _validated(encoded, rows)
            file.seek(HEADER_LENGTH_SIZE)
            previous = b"".join(_chunks(file, old.header_size))
            if previous != encoded[HEADER_LENGTH_SIZE:]:
                _overwrite_header(file, encoded, previous)
            return header
        encoded = _frame(body)
        header = _validated(encoded, rows)
        file.seek(0)
        if b"".join(_chunks(file, old.data_start)) == encoded:
            return header  # the same bytes: nothing to write (nor a new inode to make)
        with _replacing(target, mode=stat.S_IMODE(os.fstat(file.fileno()).st_mode)) as out:
            _write_all(out, encoded)
            file.seek(old.data_start)
            for chunk in _chunks(file, old.data_size):
                _write_all(out, chunk)
            file.close()  # before the rename: Windows cannot replace an open file
    return header


def _open_regular(path: str, *, writable: bool) -> BinaryIO:
    """A regular file opened (to read, or to read and write), or OSError: a FIFO would block
    the open (or the first read) until a writer came, a device is not a file to rewrite."""
    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):
        raise OSError(errno.EINVAL, f"not a regular file but {mode_kind(status.st_mode)}", path)
    flags = (os.O_RDWR if writable else os.O_RDONLY) | getattr(os, "O_NONBLOCK", 0)
    descriptor = os.open(path, flags | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # replaced since the stat
            raise OSError(errno.EINVAL, "not a regular file", path)
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return open(descriptor, "r+b" if writable else "rb", buffering=0)
    except BaseException:
        os.close(descriptor)
        raise


# --- checking the arguments ---------------------------------------------------------------


def _items(tensors: object) -> Iterable[tuple[object, object]]:
    if not isinstance(tensors, Mapping):
        raise TypeError(
            f"tensors must be a mapping of name to tensor, not {type(tensors).__name__}"
        )
    return tensors.items()


def _spec(name: object, value: object, *, arity: int) -> tuple[str, str, tuple[int, ...], object]:
    """name, dtype, shape and (for arity 3) data, checked for type and range."""
    if not isinstance(name, str):
        raise TypeError(f"tensor names must be str, not {type(name).__name__}: {name!r}")
    if name == METADATA_KEY:
        # The reference writes such a tensor as if it were the metadata: no reader opens it.
        raise HeaderError(
            "InvalidHeaderDeserialization",
            "'__metadata__' cannot name a tensor: it is the header's key for the metadata",
            tensor=name,
        )
    if not _is_sequence(value) or len(value) != arity:
        wanted = "(dtype, shape)" if arity == 2 else "(dtype, shape, data)"
        raise TypeError(f"tensor {name!r}: expected a tuple {wanted}, not {value!r:.60}")
    dtype = value[0]
    if not isinstance(dtype, str):
        raise TypeError(f"tensor {name!r}: dtype must be a str, not {type(dtype).__name__}")
    if dtype not in _DTYPE_RANK:
        raise HeaderError(
            "InvalidHeaderDeserialization",
            f"tensor {name!r}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BITS)}",
            tensor=name,
        )
    return name, dtype, _checked_shape(name, value[1]), value[2] if arity == 3 else None


def _is_sequence(value: object) -> TypeGuard[Sequence[object]]:
    """A tuple, a list or another sequence, but not a string."""
    # Concrete types first: for many tensors the ABC check would cost more than all the rest.
    return isinstance(value, (tuple, list)) or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    )


def _checked_shape(name: str, shape: object) -> tuple[int, ...]:
    if isinstance(shape, (tuple, list)) and all(type(dim) is int for dim in shape):
        dims: tuple[int, ...] = tuple(shape)  # the usual case, checked at C speed
    else:
        dims = _shape_as_ints(name, shape)
    if dims and (min(dims) < 0 or max(dims) > U64_MAX):
        culprit = next(dim for dim in dims if not 0 <= dim <= U64_MAX)
        raise HeaderError(
            "InvalidHeaderDeserialization",
            f"tensor {name!r}: dimensions must be in 0..2^64-1, found {culprit}",
            tensor=name,
        )
    return dims


def _shape_as_ints(name: str, shape: object) -> tuple[int, ...]:
    """Any iterable of integers (numpy integers too, not bools or floats) as a tuple of ints."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise TypeError(f"tensor {name!r}: shape must be a sequence of integers, not {shape!r:.60}")
    dims = []
    for dim in shape:
        if isinstance(dim, bool):
            raise TypeError(f"tensor {name!r}: shape must hold integers, not {dim!r}")
        try:
            dims.append(index(dim))
        except TypeError:
            raise TypeError(
                f"tensor {name!r}: shape must hold integers, not {type(dim).__name__} {dim!r}"
            ) from None
    return tuple(dims)


def _checked_metadata(metadata: object) -> dict[str, str] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(
            f"metadata must be a mapping of str to str or None, not {type(metadata).__name__}"
        )
    copy = dict(metadata)
    for key, value in copy.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                f"metadata keys and values must be str, found {key!r}: {type(value).__name__}"
            )
    return copy


def _flat_view(name: str, data: object) -> memoryview:
    """The buffer's bytes as a flat memoryview (no copy); the caller releases it."""
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"tensor {name!r}: data must be a bytes-like object (bytes, bytearray, memoryview, "
            f"a numpy array...), not {type(data).__name__}"
        ) from None
    with view:
        if not view.c_contiguous:
            raise TypeError(
                f"tensor {name!r}: data is not C-contiguous (row-major); pass a contiguous "
                "copy, e.g. numpy.ascontiguousarray(array)"
            )
        if view.format.startswith((">", "!")):
            raise TypeError(
                f"tensor {name!r}: data holds big-endian values ({view.format!r}), and "
                "safetensors stores little-endian ones; byte-swap it first"
            )
        # raw() is a flat byte view of any contiguous buffer, whatever its format; a
        # memoryview's cast("B") only works from native single-character formats.
        buffer = pickle.PickleBuffer(data)  # type: ignore[arg-type]
        raw = buffer.raw()
        buffer.release()
    return raw


# --- layout and encoding --------------------------------------------------------------------


def _nbytes(dtype: str, dims: tuple[int, ...]) -> int:
    """The bytes dtype x shape needs, or 0 when that is not a valid size.

    The 0 is a placeholder: `parse_header` then finds the overflow (ValidationOverflow) or
    the partial byte (MisalignedSlice) and reports it as the reader would.
    """
    count = 1
    for dim in dims:
        count *= dim
        if count > U64_MAX:
            return 0
    bits = count * DTYPE_BITS[dtype]
    return bits // 8 if bits <= U64_MAX and bits % 8 == 0 else 0


def _order(entry: tuple[str, str, object, object]) -> tuple[int, str]:
    return _DTYPE_RANK[entry[1]], entry[0]


def _laid_out(entries: list[tuple[str, str, tuple[int, ...], int]]) -> list[_Row]:
    """The reference's order, with data offsets packed from 0."""
    rows = []
    offset = 0
    for name, dtype, dims, size in sorted(entries, key=_order):
        rows.append((name, dtype, dims, offset, offset + size))
        offset += size
    if offset > U64_MAX:
        raise HeaderError(
            "ValidationOverflow",
            f"the tensors need {offset:,} bytes in all, more than 2^64-1",
        )
    return rows


def _json(rows: Sequence[_Row], metadata: dict[str, str] | None) -> bytes:
    """The header's JSON as the reference writes it, unpadded.

    json.dumps compact, ensure_ascii=False, escapes strings exactly as serde_json does:
    ``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``, other controls as ``\\u00XX`` (lowercase),
    everything else (DEL, U+2028, non-ASCII) as itself.
    """
    # `__metadata__` first when present, even empty: the reference's bug is writing `{}`
    # before it when there are no tensors.
    document: dict[str, object] = {} if metadata is None else {METADATA_KEY: metadata}
    for name, dtype, dims, begin, end in rows:
        document[name] = {"dtype": dtype, "shape": dims, "data_offsets": (begin, end)}
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), check_circular=False)
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise _surrogate_error(rows, metadata) from None


def _surrogate_error(rows: Sequence[_Row], metadata: dict[str, str] | None) -> HeaderError:
    """Name the string that UTF-8 could not encode (only lone surrogates fail)."""
    strings: list[tuple[str | None, str]] = [(name, name) for name, *_ in rows]
    strings += [(None, string) for item in (metadata or {}).items() for string in item]
    tensor, culprit = next(item for item in strings if not _encodable(item[1]))
    return HeaderError(
        "InvalidHeader",
        f"the string {culprit[:40]!r} holds a lone surrogate, which UTF-8 (and so a "
        "safetensors header) cannot hold",
        tensor=tensor,
    )


def _encodable(text: str) -> bool:
    """Whether UTF-8 can hold the string (a lone surrogate is all it cannot)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _frame(body: bytes, size: int | None = None) -> bytes:
    """The length prefix, the JSON and its padding: to ``size``, or to a multiple of 8."""
    if size is None:
        size = len(body) + -len(body) % _ALIGNMENT
    if size > _MAX_HEADER_SIZE:
        raise HeaderError(
            "HeaderTooLarge",
            f"the header would be {size:,} bytes, above the limit of {_MAX_HEADER_SIZE:,} "
            "that the reference reads",
        )
    return size.to_bytes(HEADER_LENGTH_SIZE, "little") + body + b" " * (size - len(body))


def _validated(encoded: bytes, rows: Sequence[_Row]) -> Header:
    """The reader's verdict on the file these bytes would start."""
    data_size = rows[-1][4] if rows else 0
    return parse_header(encoded, file_size=len(encoded) + data_size)


def _buffer_error(
    error: HeaderError, entries: Sequence[tuple[str, str, tuple[int, ...], memoryview]]
) -> HeaderError:
    """Restate the reader's size error in terms of the data given, not data_offsets."""
    if error.kind != "TensorInvalidInfo":
        return error
    name, dtype, dims, view = next(entry for entry in entries if entry[0] == error.tensor)
    return HeaderError(
        error.kind,
        f"tensor {name!r}: dtype {dtype} and shape [{', '.join(map(str, dims))}] need "
        f"{_nbytes(dtype, dims):,} bytes, but its data has {view.nbytes:,} bytes",
        tensor=name,
    )


# --- I/O ------------------------------------------------------------------------------------


def _write_all(file: BinaryIO, data: bytes | memoryview) -> None:
    """Write every byte: a raw file may write fewer than asked, and says how many."""
    with memoryview(data) as view, view.cast("B") as flat:
        done = 0
        while done < len(flat):
            written = file.write(flat[done:])
            if not written:
                raise OSError(f"the write stopped after {done:,} of {len(flat):,} bytes")
            done += written


def _chunks(file: BinaryIO, count: int) -> Iterator[bytes]:
    """The next ``count`` bytes of ``file``, at most `_COPY_CHUNK` at a time."""
    while count > 0:
        chunk = file.read(min(count, _COPY_CHUNK))
        if not chunk:
            raise HeaderError(
                "MetadataIncompleteBuffer",
                f"the file ended {count:,} bytes early: was it truncated while being updated?",
            )
        count -= len(chunk)
        yield chunk


def _overwrite_header(file: BinaryIO, encoded: bytes, old_body: bytes) -> None:
    """Write a header of the old length N over the old one, never leaving a mixed one.

    A kill during one large write leaves its first pages new and the rest old (Linux stops
    a write at a page boundary when a fatal signal is pending), which can parse. So: the
    length prefix becomes `TORN_PREFIX` first (8 bytes at offset 0, inside one page and one
    disk sector: never cut), then the N bytes are written, then the real prefix (N is
    unchanged, so it is also the old one). Each step is synced before the next, so that a
    power loss cannot reorder them either (as far as fsync orders writes: macOS's leaves the
    disk's own cache unflushed). If a write raises, the old header is put back.
    """
    prefix = encoded[:HEADER_LENGTH_SIZE]
    try:
        _write_synced(file, 0, TORN_PREFIX)
        _write_synced(file, HEADER_LENGTH_SIZE, encoded[HEADER_LENGTH_SIZE:])
        _write_synced(file, 0, prefix)
    except BaseException:
        # A failed or interrupted write (an error, KeyboardInterrupt) must not leave a torn
        # header behind; the bytes it replaced are in hand.
        with contextlib.suppress(OSError):
            _write_synced(file, HEADER_LENGTH_SIZE, old_body)
            _write_synced(file, 0, prefix)
        raise


def _write_synced(file: BinaryIO, offset: int, data: bytes) -> None:
    file.seek(offset)
    _write_all(file, data)
    os.fsync(file.fileno())


def _mode_of(path: str) -> int | None:
    """The permission bits of an existing file, to keep them when it is replaced."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def _replacing(target: str, *, mode: int | None) -> Iterator[BinaryIO]:
    """A new file in ``target``'s directory that replaces ``target`` if the block succeeds.

    It is synced before the rename, so that after a crash ``target`` is either the old file
    or the complete new one; on any exception it is removed and ``target`` is untouched. A
    killed process cannot remove it: the temporary files earlier writers left for ``target``
    are removed first (`_remove_stale`).
    """
    directory, base = os.path.split(target)
    _remove_stale(directory, base)
    temp, fd = _create_temporary(directory, base)
    try:
        with open(fd, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
            if sys.platform != "win32":
                _rename(temp, target, mode)  # still locked: never seen as stale
        if sys.platform == "win32":
            _rename(temp, target, mode)  # Windows cannot rename an open file
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_directory(directory)


def _rename(temp: str, target: str, mode: int | None) -> None:
    if mode is not None:
        os.chmod(temp, mode)
    os.replace(temp, target)


def _temporary_name(base: str) -> str:
    """``.<base>.<8 random hex digits><their 8-digit checksum>.tmp``: ours, and only ours."""
    token = os.urandom(4).hex()
    return f".{base}.{token}{_checksum(base, token)}.tmp"


def _checksum(base: str, token: str) -> str:
    return f"{binascii.crc32(os.fsencode(f'{base}.{token}')):08x}"


def _create_temporary(directory: str, base: str) -> tuple[str, int]:
    """A new temporary file for ``base``, locked (POSIX): its path and descriptor."""
    # O_EXCL: never reuse a file someone else made. Mode 0o666 lets the umask decide, as for
    # any new file (mkstemp would give 0o600).
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(_CREATE_ATTEMPTS):
        temp = os.path.join(directory, _temporary_name(base))
        fd = os.open(temp, flags, 0o666)
        try:
            if _locked_where_made(fd, temp):
                return temp, fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise OSError(f"temporary files for {base!r} kept disappearing in {directory!r}")


def _locked_where_made(fd: int, temp: str) -> bool:
    """Lock the new file until it is renamed or closed; False if it was removed meanwhile.

    Between the creation and the lock, another writer's `_remove_stale` may find the file
    unlocked and remove it: then the lock is on a file that no longer has a name.
    """
    if sys.platform == "win32":
        return True  # an open file cannot be deleted
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        # A file system without locks (some network ones): `_remove_stale` cannot lock the
        # file either, and leaves it alone.
        return True
    try:
        return os.path.samestat(os.lstat(temp), os.fstat(fd))
    except FileNotFoundError:
        return False


def _remove_stale(directory: str, base: str) -> None:
    """Remove the temporary files killed writers left for ``base``; best effort, silent.

    A file is removed only if `_temporary_name` could have made its name (the checksum of
    its random part matches) and no writer holds it: on POSIX, its lock is free (a writer
    locks it from its creation until after the rename); on Windows, it is older than
    `_FRESH_SECONDS` and can be deleted (Windows refuses while it is open).
    """
    start = f".{base}."
    try:
        with os.scandir(directory) as entries:
            names = [e.name for e in entries if e.name.startswith(start)]
    except OSError:
        return
    for name in names:
        token = name[len(start) : -len(".tmp")]
        if (
            name.endswith(".tmp")
            and len(token) == 16
            and set(token) <= _HEX_DIGITS
            and token[8:] == _checksum(base, token[:8])
        ):
            with contextlib.suppress(OSError):
                _remove_if_unused(os.path.join(directory, name))


def _remove_if_unused(path: str) -> None:
    if sys.platform == "win32":
        if time.time() - os.stat(path).st_mtime > _FRESH_SECONDS:
            os.unlink(path)
        return
    import fcntl

    # O_NOFOLLOW: a link named like our files is not ours; O_NONBLOCK: nor is a FIFO.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: a writer holds it
        os.unlink(path)
    finally:
        os.close(fd)


def _sync_directory(directory: str) -> None:
    """Make the rename itself durable (POSIX); best effort, the data is already synced."""
    with contextlib.suppress(OSError):  # e.g. Windows cannot open a directory
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
