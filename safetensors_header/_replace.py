"""Replacing a file's bytes without ever leaving a mix: new files renamed over old ones,
headers overwritten in place in steps that a crash cannot tear.

Layer: sources (local files; the writer and the adapters write through it).

`replacing` writes a new file next to the target, syncs it and renames it over the target,
with the target's permission bits, owner and group; the new file is never readable by more
users than the old one at any moment. The temporary files of killed writers are found by a
checksum in their names and removed when no live writer holds them. `overwrite_header`
rewrites a header of unchanged length in three synced steps (see its docstring). `write_all`
finishes the short writes a raw file may make; `read_chunks` copies a file's bytes a bounded
piece at a time.
"""

from __future__ import annotations

import binascii
import contextlib
import errno
import os
import stat
import sys
import time
from collections.abc import Iterator
from typing import BinaryIO, Final

from ._core.diagnose import TORN_PREFIX
from ._core.fileformat import HEADER_LENGTH_SIZE
from ._errors import HeaderError
from ._sources.local import mode_kind

__all__ = [
    "open_regular",
    "overwrite_header",
    "read_chunks",
    "replacing",
    "status_of",
    "write_all",
]

_COPY_CHUNK = 16 * 2**20  # bytes per read when copying a data buffer into a new file
# On Windows, where an open file cannot be deleted and no lock is taken, a temporary file
# changed less than this long ago may be a live writer's, between its close and its rename.
_FRESH_SECONDS: Final = 60.0
_CREATE_ATTEMPTS: Final = 10  # temporary files a concurrent clean-up may take for stale
_HEX_DIGITS: Final = frozenset("0123456789abcdef")  # what bytes.hex() writes
# The mode a temporary file is made with: for a file that replaces another, its writer's
# alone until the rename (the old file may be private: a copy of it must never be readable
# by more users than the file itself, even for a moment); for a new file, as for any new
# file, what the umask leaves of 0o666 (mkstemp would give 0o600).
_PRIVATE: Final = 0o600
_PUBLIC: Final = 0o666


def open_regular(path: str, *, writable: bool) -> BinaryIO:
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


def write_all(file: BinaryIO, data: bytes | memoryview) -> None:
    """Write every byte: a raw file may write fewer than asked, and says how many."""
    with memoryview(data) as view, view.cast("B") as flat:
        done = 0
        while done < len(flat):
            written = file.write(flat[done:])
            if not written:
                raise OSError(f"the write stopped after {done:,} of {len(flat):,} bytes")
            done += written


def read_chunks(file: BinaryIO, count: int) -> Iterator[bytes]:
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


def overwrite_header(file: BinaryIO, encoded: bytes, old_body: bytes) -> None:
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
    write_all(file, data)
    os.fsync(file.fileno())


def status_of(path: str) -> os.stat_result | None:
    """An existing file's status (its permission bits, owner and group are kept when it is
    replaced), or None when there is no file."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def replacing(target: str, *, like: os.stat_result | None) -> Iterator[BinaryIO]:
    """A new file in ``target``'s directory that replaces ``target`` if the block succeeds.

    ``like`` is the status of the file being replaced (None for a new file). The new file
    is made with mode 0o600 (``0o666`` less the umask for a new file), so that no one but
    its writer can read it before the rename, given ``like``'s owner and group at once
    (PermissionError before a byte is written where that is not allowed: only root can give
    a file away), and ``like``'s permission bits just before the rename.

    It is synced before the rename, so that after a crash ``target`` is either the old file
    or the complete new one; on any exception it is removed and ``target`` is untouched. A
    killed process cannot remove it: the temporary files earlier writers left for ``target``
    are removed first (`_remove_stale`).
    """
    directory, base = os.path.split(target)
    _remove_stale(directory, base)
    temp, fd = _create_temporary(directory, base, _PRIVATE if like is not None else _PUBLIC)
    try:
        with open(fd, "wb") as file:
            if like is not None:
                _keep_owner(fd, like, target)
            yield file
            file.flush()
            os.fsync(file.fileno())
            if sys.platform != "win32":
                if like is not None:  # (after the owner: chown clears setuid and setgid)
                    os.fchmod(fd, stat.S_IMODE(like.st_mode))
                os.replace(temp, target)  # still locked: never seen as stale
        if sys.platform == "win32":
            if like is not None:
                os.chmod(temp, stat.S_IMODE(like.st_mode))
            os.replace(temp, target)  # Windows cannot rename an open file
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_directory(directory)


def _keep_owner(fd: int, like: os.stat_result, target: str) -> None:
    """Give the new file ``like``'s owner and group, or PermissionError (POSIX)."""
    if sys.platform == "win32":
        return
    made = os.fstat(fd)
    if (made.st_uid, made.st_gid) == (like.st_uid, like.st_gid):
        return
    try:
        os.fchown(fd, like.st_uid, like.st_gid)
    except OSError as error:
        raise PermissionError(
            errno.EPERM,
            f"cannot replace it and keep its owner and group (uid {like.st_uid}, gid "
            f"{like.st_gid}): the new file would be uid {made.st_uid}, gid {made.st_gid}, and "
            f"giving it away was refused ({error.strerror or error}); only root can give a "
            "file to another user (update_metadata(..., in_place=True) keeps the file itself)",
            target,
        ) from None


def temporary_name(base: str) -> str:
    """``.<base>.<8 random hex digits><their 8-digit checksum>.tmp``: ours, and only ours."""
    token = os.urandom(4).hex()
    return f".{base}.{token}{_checksum(base, token)}.tmp"


def _checksum(base: str, token: str) -> str:
    return f"{binascii.crc32(os.fsencode(f'{base}.{token}')):08x}"


def _create_temporary(directory: str, base: str, mode: int) -> tuple[str, int]:
    """A new temporary file for ``base`` made with ``mode`` (less the umask), locked (POSIX):
    its path and descriptor."""
    # O_EXCL: never reuse a file someone else made.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(_CREATE_ATTEMPTS):
        temp = os.path.join(directory, temporary_name(base))
        fd = os.open(temp, flags, mode)
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

    A file is removed only if `temporary_name` could have made its name (the checksum of
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
