"""The sans-IO core's parser: bytes in, a validated `Header` out.

Layer: core (sans-IO).

Every rule is the reference's (``read_metadata`` and ``Metadata::validate`` in the Rust core
of ``safetensors``), applied in its order: the same verdict and error kind on any input, but
where two tensors share one offset and the reference's kind varies with its hash-map order
(docs/format.md §6: ours is always one it gives). `rules` is the rule set: the exact reader
of the JSON (§3-§4) and the walk over the layout (§5); it decides every file and writes
every message. `READERS` is the table of fast readers tried before it: `compact` (the
reference's compact form, from 2 MiB), `canonical` (the form writers produce, from 2,048
characters) and `json_reader` (json's C decoder). **A fast reader enforces no rule**: it
returns exactly the columns the exact reader and the walk would, or None; the first that
answers wins, and tests and the fuzzer check the contract through this table. `columns` is
what they share. Before a json-based reader runs, the nesting depth is measured without
recursion (§3.11). No I/O happens here but `read_header`'s reads of a local path.
"""

from __future__ import annotations

import os
from operator import index

from . import canonical, compact, json_reader
from .columns import Columns
from .fileformat import HEADER_LENGTH_SIZE, MAX_HEADER_SIZE, bytes_needed, header_end, length_fault
from .rules import (
    JsonObject,
    build,
    decode_pairs,
    exact_columns,
    fail,
    in_fresh_thread,
    reject_deep_nesting,
    validate_layout,
)

__all__ = ["FILE_FIRST_READ", "READERS", "JsonObject", "Reader", "decode_pairs", "exact"]
__all__ += ["parse_file_start"]
__all__ += ["parse_header", "read", "read_header", "reader"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Final, NoReturn

    from .fileformat import Buffer
    from .header import Header


class Reader:
    """A fast reader of `READERS`: its name, its function (a header's text in, its `Columns`
    or None out), the text's length from which it is tried, and whether it runs json's
    recursive scanner (the nesting is measured first)."""

    __slots__ = ("name", "read", "smallest", "uses_json")

    def __init__(
        self,
        name: str,
        read: Callable[[str], Columns | None],
        *,
        smallest: int = 0,
        uses_json: bool = False,
    ) -> None:
        self.name, self.read, self.smallest, self.uses_json = name, read, smallest, uses_json

    def __repr__(self) -> str:
        return f"<Reader {self.name!r} from {self.smallest:,} characters>"


#: The fast readers, in the order they are tried (see the package's docstring for their
#: contract). The canonical reader is left out below 2,048 characters, where json's decoder
#: is faster (measured) and makes too few objects to matter to the collector; the compact
#: reader below 2 MiB, where the canonical one reads its form faster.
READERS: Final = (
    Reader("compact", compact.compact_columns, smallest=compact.SMALLEST),
    Reader("canonical", canonical.canonical_columns, smallest=2048),
    Reader("json", json_reader.json_columns, uses_json=True),
)


def parse_header(
    prefix: Buffer, /, *, file_size: int | None = None, max_header_size: int = MAX_HEADER_SIZE
) -> Header:
    """Parse and validate a safetensors header from bytes that start at file offset 0.

    Args:
        prefix: Any bytes-like object (``bytes``, ``bytearray``, ``memoryview``, ``mmap``)
            holding at least the first ``8 + N`` bytes of the file: the whole file, a partial
            download, a memory map. Bytes past the header are not read. (`bytes_needed`
            says how many bytes that is, from the first 8.)
        file_size: The size of the whole file. When given, the rule that the tensors cover the
            data buffer exactly is checked (``MetadataIncompleteBuffer``); when ``None`` it is
            skipped, ``Header.file_size`` is ``None``, and ``prefix`` is judged as if it were
            the whole file for the length checks.
        max_header_size: The largest N accepted (``HeaderTooLarge`` above it). The default is
            the reference's limit; raise it for huge headers, lower it for untrusted input.

    Returns:
        The validated `Header`.

    Raises:
        HeaderError: The bytes are not a valid safetensors header; ``kind`` names the
            reference's error for the same bytes. When ``prefix`` ends before the header does,
            ``needed`` says how many bytes to pass instead (kind ``PrefixTooShort`` if
            ``file_size`` shows the file is long enough). Any other exception is a bug.

    Safe to call from any number of threads at once, from a signal handler or ``__del__``
    while another parse runs, and from any depth of the caller's stack: it keeps no state.
    """
    if file_size is not None:
        file_size = index(file_size)
        if file_size < 0:
            raise ValueError(f"file_size must be 0 or more, not {file_size}")
    with memoryview(prefix) as raw:
        try:
            view = raw.cast("B")
        except TypeError:
            raise TypeError("parse_header() needs a C-contiguous bytes-like object") from None
        with view:
            header_size, text = _split(view, file_size, max_header_size)
    return build(read(text), header_size, file_size)


def parse_file_start(data: bytes, file_size: int, limit: int) -> Header | int:
    """`parse_header` of a file's first bytes `data`, for a reader that knows the file's size
    and can read more: the `Header` when `data` holds the whole header, else the number of
    bytes from offset 0 it takes (`bytes_needed`'s answer: read them and call again, or
    hand what the file gives to `parse_header`). Raises what the length prefix decides.

    The same verdicts as `parse_header`, without its buffer handling: a local file's read,
    the common case of `read_header`.
    """
    stop = header_end(data, file_size, limit)
    if stop is None:  # a bad length prefix: its verdict, or the few more bytes that tell it
        return bytes_needed(data, file_size=file_size, max_header_size=limit)
    if stop > len(data):
        return stop
    text = _decode_utf8(memoryview(data), stop)
    return build(read(text), stop - HEADER_LENGTH_SIZE, file_size)


def read_header(
    path: str | os.PathLike[str] | os.PathLike[bytes], /, *, max_header_size: int = MAX_HEADER_SIZE
) -> Header:
    """The validated `Header` of the local file at `path`: its first 16 KiB read (most
    headers), then the rest of a longer header; never its data.

    The core's own reader of a path, with what the standard library has: ``open``,
    ``os.fstat`` and ``read``. (The package's ``read_header`` reads any source: a URL, the
    Hub, a store, a file object, a pipe; and attaches the file's identity.)

    Raises:
        HeaderError: As `parse_header`; ``file_size`` is the file's.
        OSError: The file cannot be opened or read.
    """
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        data = file.read(min(size, FILE_FIRST_READ))
        parsed = parse_file_start(data, size, max_header_size)
        while isinstance(parsed, int):  # a longer header: its rest (a prefix that says more)
            more = file.read(parsed - len(data))
            if not more:  # cut short meanwhile: the bytes judged as they are
                return parse_header(data, file_size=len(data), max_header_size=max_header_size)
            data += more
            parsed = parse_file_start(data, size, max_header_size)
    return parsed


#: Bytes of a regular file read at once: most headers in one system call.
FILE_FIRST_READ: Final = 16 * 1024


def _walked(
    readers: tuple[Reader, ...],
) -> tuple[tuple[int, bool, Callable[[str], Columns | None]], ...]:
    """The table as `read` walks it: plain tuples (a small header takes a few microseconds
    in all, and attribute lookups would be a tenth of them)."""
    return tuple((reader.smallest, reader.uses_json, reader.read) for reader in readers)


_TABLE: Final = READERS
_DISPATCH: Final = _walked(READERS)


def reader(name: str) -> Reader:
    """The fast reader of `READERS` called `name` ("compact", "canonical", "json")."""
    for found in READERS:
        if found.name == name:
            return found
    raise KeyError(name)


def read(text: str) -> Columns:
    """The columns of a header's text: the first fast reader of `READERS` that answers, else
    the rule set (`exact`), which decides (and raises)."""
    measured = False
    size = len(text)
    dispatch = _DISPATCH if READERS is _TABLE else _walked(READERS)  # (a table patched in)
    try:
        for smallest, uses_json, read_columns in dispatch:
            if size < smallest:
                continue
            if uses_json and not measured:
                reject_deep_nesting(text)
                measured = True
            columns = read_columns(text)
            if columns is not None:
                return columns
        if not measured:
            reject_deep_nesting(text)
        return validate_layout(exact_columns(text))
    except RecursionError:
        # Not the input's fault (it is at most 127 levels deep): the caller's stack is. A
        # fresh thread has a fresh recursion count.
        return in_fresh_thread(read, text)


def exact(text: str) -> Columns:
    """The rule set alone: the exact reader and the walk over the layout (what every fast
    reader must agree with)."""
    reject_deep_nesting(text)
    return validate_layout(exact_columns(text))


def _split(view: memoryview, file_size: int | None, limit: int) -> tuple[int, str]:
    """The reference's checks 1-4 (§1.2): the length prefix, its limit, the file size, UTF-8."""
    have = len(view)
    stop = header_end(view, have if file_size is None else file_size, limit)
    if stop is None:
        if have < HEADER_LENGTH_SIZE and file_size is not None and file_size >= HEADER_LENGTH_SIZE:
            _prefix_too_short(have, HEADER_LENGTH_SIZE)
        raise length_fault(view, file_size, limit)
    if stop > have:
        _prefix_too_short(have, stop)
    return stop - HEADER_LENGTH_SIZE, _decode_utf8(view, stop)


def _prefix_too_short(have: int, needed: int) -> NoReturn:
    """§1.8: the bytes given end before the header, though the file is long enough."""
    if needed == HEADER_LENGTH_SIZE:
        message = f"need the first 8 bytes of the file to read the header length, got {have}"
    else:
        message = f"the header ends at byte {needed:,} but only {have:,} bytes were given"
    fail("PrefixTooShort", message, needed=needed)


def _decode_utf8(view: memoryview, stop: int) -> str:
    """§1.7, §3.1: the header is strict UTF-8 (never guessed UTF-16 or UTF-32)."""
    try:
        return str(view[HEADER_LENGTH_SIZE:stop], "utf-8")
    except UnicodeDecodeError as error:
        from .diagnose import SNIFF_SIZE, sniff

        fail(
            "InvalidHeader",
            f"the header is not valid UTF-8: {error.reason} at byte {error.start:,} of the "
            f"header (file offset {HEADER_LENGTH_SIZE + error.start:,})",
            offset=HEADER_LENGTH_SIZE + error.start,
            hint=sniff(bytes(view[:SNIFF_SIZE])),
        )
