"""Writing safetensors files and rewriting their metadata, byte for byte as the reference.

Layer: services. The bytes come from the pure encoder (`_encode`), the header being
rewritten from `read_header`, and the files are replaced through `_replace`, which never
leaves a mix of old and new.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import _replace
from ._core.fileformat import HEADER_LENGTH_SIZE
from ._encode import (
    buffer_error,
    checked_metadata,
    data_order,
    flat_view,
    frame,
    header_json,
    laid_out,
    tensor_specs,
    validated,
)
from ._errors import HeaderError
from ._sources import backend_of, read_header

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, StrPath

    from ._core.header import Header

__all__ = ["file_bytes", "update_metadata", "write_file", "write_pieces"]


def write_file(
    path: StrPath,
    tensors: Mapping[str, tuple[str, Sequence[int], ReadableBuffer] | Any],
    /,
    *,
    metadata: Mapping[str, str] | None = None,
) -> Header:
    """Write a safetensors file, byte for byte what the reference writes.

    Args:
        path: Where to write. An existing file is replaced (through a symbolic link, the
            file it points to), keeping its permission bits, owner and group; a new one gets
            the usual ``0o666 & ~umask``.
        tensors: Tensor name -> ``(dtype, shape, data)``: ``dtype`` and ``shape`` as for
            `encode_header`; ``data`` any C-contiguous bytes-like object (``bytes``,
            ``bytearray``, ``memoryview``, a numpy array, ``array.array``...) holding the
            tensor's little-endian bytes, exactly dtype size x element count of them. Or
            tensor name -> a numpy array (ml_dtypes' bfloat16 and float8 types included),
            written with its dtype's safetensors name and its shape, in little-endian C
            order whatever its own order (`safetensors_header.numpy.safetensors_dtype`).
        metadata: As for `encode_header`.

    Every size is checked before anything is written. The data is then streamed buffer by
    buffer, in the header's order and without copies, into a temporary file in the same
    directory, ``.<name>.<16 hex digits>.tmp``, which is flushed to disk and renamed over
    ``path``: a failure at any point leaves ``path`` as it was and no temporary file behind.
    The temporary file replacing an existing file is made with mode 0o600 and given the
    file's owner and group at once, its permission bits just before the rename: a private
    file's bytes are never readable by more users than the file itself. A process killed
    meanwhile leaves ``path`` as it was and its temporary file, which the next `write_file`
    or rewriting `update_metadata` of the same ``path`` removes: only files of that name
    whose random part carries this module's checksum, and that no live writer holds (a writer
    locks its file until the rename; on Windows, where an open file cannot be deleted, only
    files left unchanged for a minute).

    Returns:
        The file's `Header`, as `read_header` would return it.

    Raises:
        HeaderError: As for `encode_header`, and ``TensorInvalidInfo`` when a buffer's length
            is not what its dtype and shape need. Nothing has been written.
        TypeError: As for `encode_header`; also a buffer that is not bytes-like, not
            C-contiguous, or explicitly big-endian (byte-swap it first), or an array of a
            dtype safetensors has no name for (the message names the tensor).
        PermissionError: ``path`` belongs to another user (or a group the caller is not in)
            and the caller cannot give the new file to them (only root can): refused before
            a byte is written, rather than change the file's owner.
        OSError: The file could not be written (``path`` is then unchanged).
    """
    with contextlib.ExitStack() as views:
        encoded, header, buffers = _laid_out(tensors, metadata, views)
        write_pieces(path, [encoded, *buffers])
    return header


def write_pieces(
    destination: Any,
    pieces: Sequence[bytes | memoryview],
    /,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Write a file's bytes, piece by piece in order, wherever it goes: the one sink of the
    writers (`write_file`, awkward's `to_safetensors`).

    A local path is replaced whole, as `write_file` replaces it (a temporary file renamed
    over it: never a mix); an fsspec URL (``storage_options`` to ``url_to_fs``) and an
    fsspec filesystem's ``(filesystem, path)`` are written through the filesystem; an
    obstore store's ``(store, path)`` is put whole; a binary file object is written to.

    Raises:
        ValueError: An http(s) URL or an ``hf://`` path: HTTP has no standard way to write.
        TypeError: A destination of no kind above.
    """
    try:
        kind = backend_of(destination)[0]
    except TypeError:
        kind = "stream"  # a writer with write() but no read(): said below if not
    if kind in ("http", "hub"):
        raise ValueError(
            f"cannot write to {os.fspath(destination)[:80]!r}: HTTP has no standard way to "
            "write a file; write to a path, an fsspec URL or an object store"
        )
    if kind == "path":
        target = os.path.realpath(destination)
        with _replace.replacing(target, like=_replace.status_of(target)) as file:
            for piece in pieces:
                _replace.write_all(file, piece)
        return
    if kind == "fsspec":
        from ._extras import optional_imports

        with optional_imports("fsspec", "writing to an fsspec URL"):
            import fsspec.core  # type: ignore[import-untyped]  # optional: only for URLs
        destination = fsspec.core.url_to_fs(destination, **(storage_options or {}))
        kind = "filesystem"
    if kind == "store":
        destination[0].put(destination[1], list(pieces))  # obstore takes the pieces as they are
        return
    if kind == "filesystem":
        filesystem, path = destination
        with filesystem.open(path, "wb") as file:
            for piece in pieces:
                _replace.write_all(file, piece)
        return
    if isinstance(destination, tuple) and len(destination) == 2:
        raise TypeError(
            "a (store, path) destination needs an obstore store or an fsspec filesystem, "
            f"not {type(destination[0]).__name__}"
        )
    if not hasattr(destination, "write"):
        raise TypeError(
            "destination must be a path, an fsspec URL, a (store, path) pair or a binary file "
            f"object, not {type(destination).__name__}"
        )
    for piece in pieces:
        _replace.write_all(destination, piece)


def file_bytes(
    tensors: Mapping[str, object], /, *, metadata: Mapping[str, str] | None = None
) -> bytes:
    """The bytes `write_file` writes for these tensors, in memory."""
    with contextlib.ExitStack() as views:
        encoded, _, buffers = _laid_out(tensors, metadata, views)
        return b"".join([encoded, *buffers])


def _laid_out(
    tensors: object, metadata: Mapping[str, str] | None, views: contextlib.ExitStack
) -> tuple[bytes, Header, list[memoryview]]:
    """The header's bytes, the `Header`, and the tensors' buffers in the file's order, each
    size checked (`views` releases the buffers)."""
    specs = tensor_specs(tensors, arity=3)
    entries = [
        (name, dtype, dims, views.enter_context(flat_view(name, data)))
        for name, dtype, dims, data in specs
    ]
    # Like the reference, lay the buffers out by their own lengths: the reader's checks on
    # the header then report any buffer whose length disagrees with dtype x shape.
    rows = laid_out([(name, dtype, dims, view.nbytes) for name, dtype, dims, view in entries])
    encoded = frame(header_json(rows, checked_metadata(metadata)))
    try:
        header = validated(encoded, rows)
    except HeaderError as error:
        raise buffer_error(error, entries) from None
    return encoded, header, [view for _, _, _, view in sorted(entries, key=data_order)]


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
    permission bits, owner and group are kept, and the new file is private to its writer
    until the rename, as for `write_file`). The temporary file is
    ``.<name>.<16 hex digits>.tmp`` next to the file; one left by a killed process is removed
    by the next rewrite of the same file (see `write_file`). In place, the header is
    rewritten in three synced steps: the 8-byte length prefix is replaced by a marker
    (``TORN-HDR``), the header's N bytes are written, then the real prefix. A process stopped
    at any moment (``SIGKILL``, ``SIGTERM``, a crash) or a power loss leaves the old header,
    the new one, or a file that every reader rejects (``HeaderTooLarge``) and that
    `read_header` says is torn (``HeaderError.hint``); never a mix of the two that reads as
    valid. The data is never touched. If a write raises, the old header is written back
    before the error propagates. In place needs write permission on the file.

    Returns:
        The new `Header`, as `read_header` would return it.

    Raises:
        HeaderError: The file is not a valid safetensors file, or the new header would not
            be valid (see `encode_header`). Nothing has been written.
        TypeError: ``metadata`` is not a mapping of ``str`` to ``str`` (or ``None``).
        PermissionError: As for `write_file`, when the file is rewritten (not in place) and
            belongs to another user.
        OSError: The file could not be read or written; it is then unchanged.
    """
    new_metadata = checked_metadata(metadata)
    target = os.path.realpath(path)
    with _replace.open_regular(target, writable=in_place) as file:
        old = read_header(file)
        rows = [(t.name, t.dtype, t.shape, *t.data_offsets) for t in old.tensors.values()]
        body = header_json(rows, new_metadata)
        if in_place and len(body) <= old.header_size:
            encoded = frame(body, old.header_size)
            header = validated(encoded, rows)
            file.seek(HEADER_LENGTH_SIZE)
            previous = b"".join(_replace.read_chunks(file, old.header_size))
            if previous != encoded[HEADER_LENGTH_SIZE:]:
                _replace.overwrite_header(file, encoded, previous)
            return header
        encoded = frame(body)
        header = validated(encoded, rows)
        file.seek(0)
        if b"".join(_replace.read_chunks(file, old.data_start)) == encoded:
            return header  # the same bytes: nothing to write (nor a new inode to make)
        with _replace.replacing(target, like=os.fstat(file.fileno())) as out:
            _replace.write_all(out, encoded)
            file.seek(old.data_start)
            for chunk in _replace.read_chunks(file, old.data_size):
                _replace.write_all(out, chunk)
            file.close()  # before the rename: Windows cannot replace an open file
    return header
