"""Reading a SOURCE for a command: a file, a checkpoint or standard input, and why not.

Layer: adapters (the command line).
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Mapping, Sequence

from .._core.header import Header, TensorInfo
from .._errors import HeaderError
from .._sources import is_checkpoint, read_header
from .output import PROG, STDIN, Output, shown_source

__all__ = [
    "Failure",
    "Read",
    "failure_from",
    "failure_of",
    "header_bytes",
    "hub_source",
    "read_source",
]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Final

    from .._checkpoint import Checkpoint
    from .._fetch import SafetensorsFile


class Failure(Exception):
    """Why a source could not be read: the fields of every ``--json`` "error" object."""

    def __init__(self, kind: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.hint = kind, message, hint
        # Where in the file, for a HeaderError that says (`failure_of`).
        self.tensor: str | None = None
        self.offset: int | None = None

    def document(self) -> dict[str, object]:
        """The ``--json`` error object: always these five keys (docs/cli.md lists them)."""
        return {
            "kind": self.kind,
            "message": self.message,
            "hint": self.hint,
            "tensor": self.tensor,
            "offset": self.offset,
        }

    def report(self, source: str, out: Output, err: Output, *, json: bool) -> None:
        """Say on stderr why `source` cannot be read (and, with --json, on stdout too)."""
        if self.hint is not None and self.hint.startswith("this is "):
            err.painted(
                (f"{PROG}: {shown_source(source)}: ", None),
                (self.hint, "diagnosis"),
                (f" ({self.kind}: {self.message})", None),
            )
        else:
            err.line(f"{PROG}: {shown_source(source)}: {self.diagnosis()}")
        if json:
            out.json({"path": source, "error": self.document()})

    def text(self) -> str:
        """``KIND: message. Hint: ...``: validate's verdict, which scripts read by its kind."""
        hint = "" if self.hint is None else f". Hint: {self.hint}"
        return f"{self.kind}: {self.message}{hint}"

    def diagnosis(self) -> str:
        """For a person: the diagnosis first. For a file that is something else ("this is
        an HTML page ...": what it is, what to do), that, then the kind and the numbers;
        otherwise the kind and the message, then the hint."""
        if self.hint is None or not self.hint.startswith("this is "):
            return self.text()
        return f"{self.hint} ({self.kind}: {self.message})"


def failure_from(error: Exception) -> Failure:
    """Any other exception as a `Failure`: its class name as the kind, its text as the
    message (so that every kind in the output is an exception's or a registered one)."""
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    return Failure(type(error).__name__, text)


def failure_of(error: HeaderError | OSError, source: str, *, hint: str | None = None) -> Failure:
    """A library error as a `Failure`; an OS error names the file it is about.

    The kind is the HeaderError's, or the exception's class name (``FileNotFoundError``):
    never a name made up here, so that every kind in the output is one docs/errors.md lists.
    """
    if isinstance(error, HeaderError):
        failure = Failure(error.kind, error.message, hint=error.hint)
        failure.tensor, failure.offset = error.tensor, error.offset
        return failure
    message = error.strerror or str(error) or type(error).__name__
    if isinstance(error.filename, (str, bytes, os.PathLike)):
        where = os.fsdecode(error.filename)
        if where != source and where not in message:  # a shard: say which
            message = f"{message}: {where}"
        missing = isinstance(error, FileNotFoundError) and where != source
        if missing and hint is None and _is_checkpoint(source):
            hint = (
                "the checkpoint's index names this file, but it is not there: an incomplete "
                "download? Fetch every file the index lists"
            )
    return Failure(type(error).__name__, message, hint=hint)


# A Hub repository as people write it: "org/repo" or "org/repo@revision" (Hub names are
# letters, digits, "-", "_" and "."). Compiled by `re` when first matched: a local path is
# looked for first, and a start pays for every compile.
_REPOSITORY: Final = r"[A-Za-z0-9][\w.-]*/[\w.-]+(?:@[\w./%-]+)?"


def hub_source(source: str, err: Output) -> str:
    """``org/repo`` (or ``org/repo@revision``) that is no local path: the Hub's repository,
    ``hf://org/repo``, said on stderr; any other source as it is."""
    if os.path.lexists(source) or not re.fullmatch(_REPOSITORY, source):
        return source
    err.line(
        f"{PROG}: there is no file or directory {source!r} here: reading hf://{source} from "
        "the Hugging Face Hub"
    )
    return f"hf://{source}"


def _is_checkpoint(source: str) -> bool:
    """An index JSON (local or a URL), a directory or a Hub repository: read_checkpoint's."""
    return source != STDIN and is_checkpoint(source)


class _Recorder:
    """Standard input for `read_header`, keeping the bytes read (the strict audit needs them)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.data = bytearray()

    def read(self, size: int = -1, /) -> bytes:
        chunk = self._stream.read(size)
        self.data += chunk
        return chunk

    def seekable(self) -> bool:
        try:
            return self._stream.seekable()
        except (OSError, ValueError):
            return False

    def seek(self, offset: int, whence: int = 0, /) -> int:
        self.data.clear()  # `read_header` seeks back to the start before it reads
        return self._stream.seek(offset, whence)


class Read:
    """A source as read: one file's header, or a checkpoint (and what it did not read)."""

    def __init__(
        self,
        source: str,
        *,
        header: Header | None = None,
        checkpoint: Checkpoint | None = None,
        prefix: bytes | None = None,
        file: SafetensorsFile | None = None,
        other_files: Sequence[str] = (),
    ) -> None:
        self.source = source
        self.header = header
        self.checkpoint = checkpoint
        self.prefix = prefix  # the header's bytes, when they were kept (standard input)
        self.file = file  # the file opened, for its header's bytes (--strict)
        self.other_files = list(other_files)  # beside a directory's checkpoint, not part of it

    @property
    def headers(self) -> dict[str, Header]:
        """Every file's header: the file's name (or the shard's, as the index writes it)."""
        if self.checkpoint is not None:
            return dict(self.checkpoint.files)
        assert self.header is not None
        return {self.source: self.header}

    @property
    def tensors(self) -> Mapping[str, TensorInfo]:
        if self.checkpoint is not None:
            return self.checkpoint.tensors
        assert self.header is not None
        return self.header.tensors


def read_source(
    source: str,
    command: str,
    *,
    opened: bool = False,
    progress: Callable[[int, int], object] | None = None,
) -> Read:
    """Read one SOURCE; `Failure` says why it cannot be read.

    `opened`: keep a single file open (`Read.file`) for the reads of its data or its
    header's bytes that follow (``hash``, ``validate``); without it, only the header is read
    (and the data path is not imported: a command's start stays cheap). `progress` is
    `read_checkpoint`'s, for a checkpoint's shards.
    """
    try:
        if source == STDIN:
            if sys.stdin is None:  # started with no standard input at all
                raise OSError(errno.EBADF, "there is no standard input to read")
            recorder = _Recorder(sys.stdin.buffer)
            header = read_header(recorder)
            return Read(source, header=header, prefix=bytes(recorder.data[: header.data_start]))
        if _is_checkpoint(source):
            return _read_checkpoint(source, command, progress)
        if not opened:
            return Read(source, header=read_header(source))
        from .._fetch import open_file

        file = open_file(source)
        return Read(source, header=file.header, file=file)
    except (HeaderError, OSError) as error:
        raise failure_of(error, source) from None
    except (ValueError, ImportError) as error:  # a malformed URL; fsspec not installed
        raise failure_from(error) from None


def _read_checkpoint(
    source: str, command: str, progress: Callable[[int, int], object] | None
) -> Read:
    from .._checkpoint import directory_entry, no_entry, read_checkpoint

    if "://" in source or not os.path.isdir(source):
        return Read(source, checkpoint=read_checkpoint(source, progress=progress))
    picked, names = directory_entry(source)
    if picked is None:
        hint = _what_to_run(source, names, command)
        raise failure_of(no_entry(source, names), source, hint=hint)
    checkpoint = read_checkpoint(source, progress=progress)
    others = [
        name
        for name in names
        if name.endswith((".safetensors", ".safetensors.index.json"))
        and name != picked
        and name not in checkpoint.files
    ]
    return Read(source, checkpoint=checkpoint, other_files=others)


def _what_to_run(folder: str, names: list[str], command: str) -> str | None:
    """For a directory without a checkpoint: the command that reads what it holds."""
    import shlex

    indexes = [name for name in names if name.endswith(".safetensors.index.json")]
    files = [name for name in names if name.endswith(".safetensors")]
    run = f"{PROG} {command}"
    if indexes:
        return f"name the index: {run} {shlex.quote(os.path.join(folder, indexes[0]))}"
    if command == "diff" and len(files) > 1:
        pair = " ".join(shlex.quote(os.path.join(folder, name)) for name in files[:2])
        return f"name two of them: {run} {pair}"
    if len(files) == 1:
        return f"name the file: {run} {shlex.quote(os.path.join(folder, files[0]))}"
    if files:
        return f"name the files: {run} {shlex.quote(folder)}/*.safetensors"
    return None


def header_bytes(read: Read, name: str, header: Header) -> bytes:
    """The first ``data_start`` bytes of one file of `read` (of its shard `name`), read from
    the file its header came from."""
    if read.prefix is not None:
        return read.prefix
    file = read.file if read.checkpoint is None else read.checkpoint.shards[name]
    assert file is not None
    try:
        (prefix,) = file.read_ranges([(0, header.data_start)])
    except (HeaderError, OSError) as error:
        raise failure_of(error, read.source) from None
    return bytes(prefix)
