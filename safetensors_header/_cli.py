"""The command line: ``safetensors-header inspect|validate|diff SOURCE...``.

Layer: adapters (on the services and the public names).

Output goes to stdout; why a source cannot be read goes to stderr (for ``validate``, stdout:
it is the verdict), one line each, never a traceback. Text that came from a file or a server
(names, metadata, a reply's reason phrase) is escaped: no control, bidi or line-separator
character reaches the terminal, and every character is encodable in the output's encoding.
``--json`` prints JSON Lines: one object per source (for ``diff``, one in all), each on one
line, as soon as it is known.

Exit status: 0 when every source was read (and, for ``validate``, is valid), 1 when any was
not, 2 for usage errors; ``diff``, as diff(1): 0 when both describe the same tensors, 1 when
not, 2 when either cannot be read. A reader that goes away early (``| head``) changes nothing
but the output: the work goes on, unprinted, and the exit status is the one it would be.
"""

from __future__ import annotations

import argparse
import errno
import fnmatch
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence

from . import __version__
from ._errors import HeaderError
from ._header import Header, TensorInfo, by_dtype, shown_shape
from ._sources import kind_of, read_header

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import IO, Any, Final, TextIO

    from ._audit import Finding
    from ._checkpoint import Checkpoint
    from ._fetch import SafetensorsFile

__all__ = ["main"]

_PROG: Final = "safetensors-header"
_STDIN: Final = "-"  # the SOURCE that means standard input
_STDIN_SHOWN: Final = "<stdin>"
_SHOWN_VALUE: Final = 200  # characters of a metadata value the text output shows
_SHOWN_DIFF_VALUE: Final = 60  # the same, in a diff's table of metadata
_NARROWEST: Final = 12  # a column cut to fit the terminal keeps at least this many characters
_LISTED_FILES: Final = 5  # file names a message about a directory lists
_SORT_KEYS: Final[dict[str, Callable[[TensorInfo], tuple[int, str]]]] = {
    "offset": lambda t: (t.start, ""),
    "name": lambda t: (0, t.name),
    "size": lambda t: (-t.nbytes, t.name),
}
# The characters a line is checked for: anything but printable ASCII. Printable ones (é, emoji)
# stay when the output can encode them; the rest (C0, DEL, C1, bidi controls, U+2028/2029,
# lone surrogates...) are written as escapes.
_NOT_PRINTABLE_ASCII: Final = re.compile(r"[^\x20-\x7e]")
_BATCH: Final = 1024  # lines written at a time
_DIGITS: Final = re.compile(r"[0-9]+")
_SHORT_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}  # as repr() writes them
_SOURCE_HELP: Final = (
    "a .safetensors file, a checkpoint (a directory, or its index .json), an http(s):// URL "
    "of either, or - for standard input"
)
_EXIT_STATUS: Final = """\
exit status: 0 when every SOURCE was read (validate: and is valid), 1 when any was not,
2 for a usage error (diff: see its --help). inspect and diff say why a SOURCE cannot be
read on stderr, one line each; validate says it on stdout, as its verdict."""
_INSPECT_STATUS: Final = """\
exit status: 0 when every SOURCE was read, 1 when any was not, 2 for a usage error.
Errors go to stderr, one line each."""
_VALIDATE_STATUS: Final = """\
exit status: 0 when every SOURCE is valid, 1 when any is not (or cannot be read), 2 for a
usage error. The status is the same when the output is cut short (| head)."""
_EPILOG: Final = f"""\
examples:
  {_PROG} inspect model.safetensors
  {_PROG} inspect https://huggingface.co/ORG/MODEL/resolve/main/model.safetensors
  {_PROG} validate --strict *.safetensors
  {_PROG} diff base-model/ fine-tuned-model/

A SOURCE is a .safetensors file, a checkpoint (a directory, or its index .json), an
http(s):// URL of either, or - for standard input. Only headers are read, never the
tensors' data. --json prints JSON Lines: one object per SOURCE (for diff, one object).

{_EXIT_STATUS}"""
_INSPECT_EPILOG: Final = f"""\
examples:
  {_PROG} inspect model.safetensors
  {_PROG} inspect --sort size --filter '*.weight' ./checkpoint-dir
  {_PROG} inspect https://huggingface.co/ORG/MODEL/resolve/main/model.safetensors.index.json
  {_PROG} inspect --json model.safetensors | jq '.totals.by_dtype'
  curl -s URL | {_PROG} inspect -

Byte ranges are absolute offsets in the file: start-end, end exclusive. On a terminal, long
names are shortened in the middle to fit; piped, nothing is cut.

{_INSPECT_STATUS}"""
_VALIDATE_EPILOG: Final = f"""\
examples:
  {_PROG} validate model.safetensors
  {_PROG} validate --strict ./checkpoint-dir *.safetensors
  {_PROG} validate --json *.safetensors | jq -r 'select(.valid | not) | .path'

One line per SOURCE (PATH: ok, or PATH: KIND: message), then one per warning or --strict
finding, each starting with PATH. Warnings (an index whose total_size is wrong, a tensor
the index does not list) leave the exit status alone unless --strict is given.

{_VALIDATE_STATUS}"""
_DIFF_EPILOG: Final = f"""\
examples:
  {_PROG} diff model.safetensors model-fp16.safetensors
  {_PROG} diff ./base-model https://huggingface.co/ORG/MODEL/resolve/main/model.safetensors
  {_PROG} diff --json A B | jq '.changed[].name'

Compares the headers alone: tensors added, removed and changed (dtype, shape, size), the
files' __metadata__ keys added, removed and changed, and the totals per dtype of A and B.
Where a tensor is stored (its shard, its offset) is not a difference.

exit status: 0 when A and B describe the same tensors (names, dtypes and shapes; metadata may
differ), 1 when they do not, 2 when either cannot be read or for a usage error."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default: ``sys.argv[1:]``); return the exit status."""
    parser = _argument_parser()
    args = parser.parse_args(argv)
    sources = [args.a, args.b] if args.command == "diff" else args.sources
    if sources.count(_STDIN) > 1:
        parser.error("- (standard input) can be read only once")
    out, err = _Output(sys.stdout), _Output(sys.stderr)
    try:
        command = {"inspect": _inspect, "validate": _validate, "diff": _diff}[args.command]
        status = command(args, out, err)
    except KeyboardInterrupt:
        err.line(f"{_PROG}: interrupted")
        status = 130  # 128 + SIGINT, as a shell reports it
    out.flush()
    err.flush()
    return status


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's, given the terminal's width as shutil.get_terminal_size finds it, without
    importing shutil (argparse makes a formatter for every argument it adds: 3 ms a start)."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = _terminal_columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else standard output's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _argument_parser() -> argparse.ArgumentParser:
    raw = _Formatter
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Read the headers of safetensors files without loading them.",
        epilog=_EPILOG,
        formatter_class=raw,
    )
    parser.add_argument("--version", action="version", version=f"{_PROG} {__version__}")
    # prog= given: argparse would otherwise build a help formatter now.
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", prog=_PROG)
    inspect = commands.add_parser(
        "inspect",
        help="show the tensors, metadata and totals of each source",
        description="Show each source's header facts, metadata, tensors and totals.",
        epilog=_INSPECT_EPILOG,
        formatter_class=raw,
    )
    inspect.add_argument("sources", nargs="+", metavar="SOURCE", help=_SOURCE_HELP)
    inspect.add_argument("--json", action="store_true", help="one JSON object per SOURCE")
    inspect.add_argument(
        "--sort", choices=sorted(_SORT_KEYS), default="offset", help="tensor order (offset)"
    )
    inspect.add_argument(
        "--filter", metavar="GLOB", help="only tensors whose name matches, e.g. '*.bias'"
    )
    validate = commands.add_parser(
        "validate",
        help="check each source; one line per source",
        description="Check each source as the reference implementation would; with --strict, "
        "also report what it accepts but a careful reader should not.",
        epilog=_VALIDATE_EPILOG,
        formatter_class=raw,
    )
    validate.add_argument("sources", nargs="+", metavar="SOURCE", help=_SOURCE_HELP)
    validate.add_argument(
        "--strict",
        action="store_true",
        help="add the strict audit, and fail checkpoints with warnings",
    )
    validate.add_argument("--json", action="store_true", help="one JSON object per SOURCE")
    diff = commands.add_parser(
        "diff",
        help="compare the tensors and metadata of two sources",
        description="Compare two files, checkpoints or URLs by their headers alone.",
        epilog=_DIFF_EPILOG,
        formatter_class=raw,
    )
    diff.add_argument("a", metavar="A", help=_SOURCE_HELP)
    diff.add_argument("b", metavar="B", help="the same, compared with A")
    diff.add_argument("--json", action="store_true", help="one JSON object")
    return parser


# --- output -------------------------------------------------------------------------------


class _Output:
    """stdout or stderr for the commands: text escaped, any encoding, a closed pipe survived.

    `line` escapes what it is given, so that nothing from a file or a server can drive the
    terminal (escape sequences, bidi overrides, line separators) and nothing can fail to
    encode (``PYTHONIOENCODING=ascii``). When the reader goes away (`| head`), writes are
    dropped from then on and `closed` is set; the descriptor is pointed at the null device,
    so that the interpreter's own flush at exit has somewhere to go (the recipe of the Python
    docs, "Note on SIGPIPE").
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.closed = False
        self.encoding: str = getattr(stream, "encoding", None) or "utf-8"
        self._unicode = self.encoding.lower().replace("_", "-").startswith(("utf-8", "utf8"))
        self.ellipsis = "…" if self._encodes("…") else "..."
        try:
            self.tty = stream.isatty()
        except (OSError, ValueError):
            self.tty = False

    def _encodes(self, char: str) -> bool:
        if self._unicode:
            return True  # a lone surrogate is not printable: escaped before this is asked
        try:
            char.encode(self.encoding)
        except UnicodeEncodeError:
            return False
        return True

    def shown(self, text: str) -> str:
        """`text` with every character that is not printable, or not encodable, escaped."""
        if text.isascii() and text.isprintable():
            return text  # the common case, checked in C
        return _NOT_PRINTABLE_ASCII.sub(self._text_escape, text)

    def _text_escape(self, match: re.Match[str]) -> str:
        char = match[0]
        if char.isprintable() and self._encodes(char):
            return char
        short = _SHORT_ESCAPES.get(char)
        if short is not None:
            return short
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, in a file name (PEP 383)
            return f"\\x{code - 0xDC00:02x}"
        if code < 0x100:
            return f"\\x{code:02x}"
        return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

    def line(self, text: str = "") -> None:
        """Write `text`, escaped, and a newline."""
        self.write(self.shown(text) + "\n")

    def lines(self, texts: Iterable[str]) -> None:
        """`line` for each of `texts`, written a batch at a time (stops when nobody reads)."""
        batch: list[str] = []
        for text in texts:
            batch.append(text)
            if len(batch) == _BATCH:
                self._write_lines(batch)
                batch.clear()
                if self.closed:
                    return
        self._write_lines(batch)

    def _write_lines(self, texts: list[str]) -> None:
        if not texts:
            return
        text = "\n".join(texts) + "\n"
        if not (text.isascii() and text.replace("\n", " ").isprintable()):  # both in C
            text = "".join(self.shown(line) + "\n" for line in texts)
        self.write(text)

    def json(self, document: object) -> None:
        """Write `document` as one line of JSON, escaped as `shown` does, in JSON's escapes.

        On an output that is not UTF-8, every non-ASCII character is escaped: the line is
        then ASCII, which is UTF-8 as JSON must be, whatever the output's encoding.
        """
        text = json.dumps(document, ensure_ascii=False)
        if not (text.isascii() and text.isprintable()):
            # Outside strings JSON text is printable ASCII, so every match is in a string.
            text = _NOT_PRINTABLE_ASCII.sub(self._json_escape, text)
        self.write(text + "\n")

    def _json_escape(self, match: re.Match[str]) -> str:
        char = match[0]
        if char.isprintable() and self._unicode:
            return char  # else ASCII only: JSON is UTF-8 (RFC 8259), and ASCII is UTF-8 too
        code = ord(char)
        if code < 0x10000:
            return f"\\u{code:04x}"
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"

    def write(self, text: str) -> None:
        if self.closed:
            return
        try:
            try:
                self._stream.write(text)
            except UnicodeEncodeError:  # not escaped by the caller: escape it here
                escaped = text.encode(self.encoding, "backslashreplace")
                self._stream.write(escaped.decode(self.encoding))
        except BrokenPipeError:
            self._close()

    def flush(self) -> None:
        if self.closed:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._close()

    def _close(self) -> None:
        self.closed = True
        try:
            descriptor = self._stream.fileno()
        except (OSError, ValueError):  # not a real file (a test's StringIO)
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, descriptor)
        os.close(devnull)

    def width(self) -> int:
        """COLUMNS if set (as shutil has it, without importing shutil), else the terminal's."""
        try:
            columns = int(os.environ["COLUMNS"])
        except (KeyError, ValueError):
            columns = 0
        if columns > 0:
            return columns
        try:
            return os.get_terminal_size(self._stream.fileno()).columns
        except (OSError, ValueError):
            return 80


def _cut(text: str, limit: int) -> str:
    """At most `limit` characters: a longer `text` ends in "..."."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _count(number: int, noun: str) -> str:
    """``1 file``, ``2 files``, ``1,000 files``."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _middle_cut(text: str, width: int, ellipsis: str) -> str:
    """`text` in `width` characters, its start and end kept: ``encoder.layer.3…query.weight``.

    One run of characters is left out, centred, or as near the centre as a run that leaves
    every digit in while keeping a third of the room for either end: the numbers (a layer's,
    an expert's, a shard's) and the end (``q_proj``, ``bias``) are what tell the rows of a
    model's table apart.
    """
    if len(text) <= width:
        return text
    keep = max(width - len(ellipsis), 2)
    cut = len(text) - keep  # characters left out
    centred = (keep + 1) // 2
    start = centred
    distance = len(text)
    least = max(keep // 3, 1)  # characters kept at either end, at least
    gap_start = least
    for match in (*_DIGITS.finditer(text), None):
        gap_end = len(text) - least if match is None else min(match.start(), len(text) - least)
        if gap_end - gap_start >= cut:  # a run of this gap leaves the digits in
            nearest = min(max(centred, gap_start), gap_end - cut)
            if abs(nearest - centred) < distance:
                start, distance = nearest, abs(nearest - centred)
        if match is not None:
            gap_start = max(match.end(), least)
    return text[:start] + ellipsis + text[start + cut :]


def _fitted(widths: list[int], shrinkable: Sequence[int], room: int) -> list[int]:
    """Column widths that fit `room` characters: the widest of `shrinkable` cut first.

    The cut columns end up equally wide (water-filling), so that a name column and a shard
    column share the room, rather than one keeping its width while the other is cut to
    nothing; none is cut below `_NARROWEST` characters.
    """
    gaps = 2 * (len(widths) - 1)
    fixed = sum(w for i, w in enumerate(widths) if i not in shrinkable) + gaps
    left = room - fixed
    wanted = sorted(widths[i] for i in shrinkable)
    if sum(wanted) <= left:
        return widths
    cap = wanted[-1]
    for done, width in enumerate(wanted):
        share = left // (len(wanted) - done)
        if width > share:
            cap = share
            break
        left -= width
    cap = max(cap, _NARROWEST)
    return [min(w, cap) if i in shrinkable else w for i, w in enumerate(widths)]


def _columns(
    out: _Output,
    titles: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    *,
    right: tuple[int, ...] = (),
    shrink: tuple[int, ...] = (0,),
) -> None:
    """Aligned columns of escaped cells; on a terminal the `shrink` columns are cut to fit."""
    natural = [max(map(len, column)) for column in zip(titles, *rows, strict=True)]
    widths = _fitted(natural, shrink, out.width()) if out.tty else natural
    cut = [i for i, (w, n) in enumerate(zip(widths, natural, strict=True)) if w < n]
    lines: Iterable[tuple[str, ...]] = (titles, *rows)
    if cut:
        lines = (_cut_cells(row, cut, widths, out.ellipsis) for row in lines)
    # One format for every row: str.format pads in C (a table can have 1,000,000 rows).
    template = "  ".join(
        f"{{:{'>' if index in right else '<'}{width}}}" for index, width in enumerate(widths)
    )
    out.lines(template.format(*row).rstrip() for row in lines)


def _cut_cells(
    row: tuple[str, ...], cut: list[int], widths: list[int], ellipsis: str
) -> tuple[str, ...]:
    cells = list(row)
    for index in cut:
        cells[index] = _middle_cut(cells[index], widths[index], ellipsis)
    return tuple(cells)


# --- reading sources ----------------------------------------------------------------------


class _Failure(Exception):
    """Why a source could not be read: the fields of every ``--json`` "error" object."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        hint: str | None = None,
        tensor: str | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind, self.message, self.hint = kind, message, hint
        self.tensor, self.offset = tensor, offset

    def document(self) -> dict[str, object]:
        """The ``--json`` error object: always these five keys (the README lists them)."""
        return {
            "kind": self.kind,
            "message": self.message,
            "hint": self.hint,
            "tensor": self.tensor,
            "offset": self.offset,
        }

    def text(self) -> str:
        hint = "" if self.hint is None else f". Hint: {self.hint}"
        return f"{self.kind}: {self.message}{hint}"


def _failure(error: HeaderError | OSError, source: str, *, hint: str | None = None) -> _Failure:
    """A library error as a `_Failure`; an OS error names the file it is about.

    The kind is the HeaderError's, or the exception's class name (``FileNotFoundError``):
    never a name made up here, so that every kind in the output is one the README lists.
    """
    if isinstance(error, HeaderError):
        return _Failure(
            error.kind, error.message, hint=error.hint, tensor=error.tensor, offset=error.offset
        )
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
    return _Failure(type(error).__name__, message, hint=hint)


def _shown_source(source: str) -> str:
    return _STDIN_SHOWN if source == _STDIN else source


def _is_remote(source: str) -> bool:
    """An http(s) URL, or another URL that fsspec reads (``s3://``, ``hf://``, ``file://``...)."""
    return kind_of(source) in ("http", "fsspec")


def _is_checkpoint(source: str) -> bool:
    """An index JSON (local or a URL) or a directory: read with read_checkpoint."""
    return source.endswith(".json") or (
        source != _STDIN and not _is_remote(source) and os.path.isdir(source)
    )


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


class _Read:
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


def _read(source: str, command: str) -> _Read:
    """Read one SOURCE; `_Failure` says why it cannot be read."""
    try:
        if source == _STDIN:
            if sys.stdin is None:  # started with no standard input at all
                raise OSError(errno.EBADF, "there is no standard input to read")
            recorder = _Recorder(sys.stdin.buffer)
            header = read_header(recorder)
            return _Read(source, header=header, prefix=bytes(recorder.data[: header.data_start]))
        if _is_checkpoint(source):
            return _read_checkpoint(source, command)
        from ._fetch import open_file

        file = open_file(source)
        return _Read(source, header=file.header, file=file)
    except (HeaderError, OSError) as error:
        raise _failure(error, source) from None
    except (ValueError, ImportError) as error:  # a malformed URL; fsspec not installed
        raise _Failure(type(error).__name__, str(error)) from None


def _read_checkpoint(source: str, command: str) -> _Read:
    from ._checkpoint import INDEX_NAMES, SINGLE_NAMES, read_checkpoint

    if _is_remote(source) or not os.path.isdir(source):
        return _Read(source, checkpoint=read_checkpoint(source))
    with os.scandir(source) as entries:
        names = sorted(entry.name for entry in entries if entry.is_file())
    picked = next((name for name in (*INDEX_NAMES, *SINGLE_NAMES) if name in names), None)
    if picked is None:
        raise _no_checkpoint(source, names, command)
    checkpoint = read_checkpoint(source)
    others = [
        name
        for name in names
        if name.endswith((".safetensors", ".safetensors.index.json"))
        and name != picked
        and name not in checkpoint.files
    ]
    return _Read(source, checkpoint=checkpoint, other_files=others)


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_LISTED_FILES])
    more = len(names) - _LISTED_FILES
    return shown + (f" and {more:,} more" if more > 0 else "")


def _no_checkpoint(folder: str, names: list[str], command: str) -> _Failure:
    """What a directory without a checkpoint holds, and what to run instead."""
    import shlex

    from ._checkpoint import INDEX_NAMES, SINGLE_NAMES

    wanted = f"no {SINGLE_NAMES[0]} or {INDEX_NAMES[0]} (nor the diffusers names)"
    indexes = [name for name in names if name.endswith(".safetensors.index.json")]
    files = [name for name in names if name.endswith(".safetensors")]
    run = f"{_PROG} {command}"
    if indexes:
        path = shlex.quote(os.path.join(folder, indexes[0]))
        return _failure(
            FileNotFoundError(
                errno.ENOENT, f"{wanted} in the directory; it holds the index {_listed(indexes)}"
            ),
            folder,
            hint=f"name the index: {run} {path}",
        )
    if files:
        if command == "diff" and len(files) > 1:
            pair = " ".join(shlex.quote(os.path.join(folder, name)) for name in files[:2])
            hint = f"name two of them: {run} {pair}"
        elif len(files) == 1:
            hint = f"name the file: {run} {shlex.quote(os.path.join(folder, files[0]))}"
        else:
            hint = f"name the files: {run} {shlex.quote(folder)}/*.safetensors"
        held = f"it holds {_count(len(files), 'safetensors file')}: {_listed(files)}"
        return _failure(
            FileNotFoundError(errno.ENOENT, f"{wanted} in the directory; {held}"),
            folder,
            hint=hint,
        )
    holds = f" (it holds {_listed(names)})" if names else " (it is empty)"
    return _failure(
        FileNotFoundError(errno.ENOENT, f"no safetensors file in the directory{holds}"), folder
    )


def _header_bytes(read: _Read, name: str, header: Header) -> bytes:
    """The first ``data_start`` bytes of one file of `read` (of its shard `name`), read from
    the file its header came from."""
    if read.prefix is not None:
        return read.prefix
    file = read.file if read.checkpoint is None else read.checkpoint.shards[name]
    assert file is not None
    try:
        (prefix,) = file.read_ranges([(0, header.data_start)])
    except (HeaderError, OSError) as error:
        raise _failure(error, read.source) from None
    return bytes(prefix)


# --- inspect ------------------------------------------------------------------------------


def _inspect(args: argparse.Namespace, out: _Output, err: _Output) -> int:
    status = 0
    printed = False
    for source in args.sources:
        try:
            read = _read(source, "inspect")
        except _Failure as failure:
            status = 1
            err.line(f"{_PROG}: {_shown_source(source)}: {failure.text()}")
            if args.json:
                out.json({"path": source, "error": failure.document()})
            continue
        if out.closed:
            continue  # nobody reads the output: only the exit status is left to find out
        if read.checkpoint is not None:
            _inspect_checkpoint(args, read, read.checkpoint, out, first=not printed)
        else:
            assert read.header is not None
            tensors = _shown_tensors(args, read.header.tensors.values())
            if args.json:
                out.json(_document(source, read.header, tensors))
            else:
                if printed:
                    out.line()
                _table(out, _shown_source(source), read.header, tensors)
        printed = True
    return status


def _shown_tensors(
    args: argparse.Namespace, tensors: Iterable[TensorInfo], *, offsets_comparable: bool = True
) -> list[TensorInfo]:
    """The tensors matching --filter, in the --sort order."""
    if args.filter is not None:
        tensors = [t for t in tensors if fnmatch.fnmatchcase(t.name, args.filter)]
    if args.sort == "offset" and not offsets_comparable:
        return list(tensors)  # offsets of different shards do not compare
    return sorted(tensors, key=_SORT_KEYS[args.sort])


def _inspect_checkpoint(
    args: argparse.Namespace, read: _Read, checkpoint: Checkpoint, out: _Output, *, first: bool
) -> None:
    owners = {name: file for file, header in checkpoint.files.items() for name in header.tensors}
    # In offset order, shard by shard: the tensors are in shard order already.
    tensors = _shown_tensors(args, checkpoint.tensors.values(), offsets_comparable=False)
    if args.json:
        out.json(
            {
                "path": read.source,
                "metadata": None if checkpoint.metadata is None else dict(checkpoint.metadata),
                "files": [
                    {
                        "name": name,
                        "header_size": header.header_size,
                        "data_start": header.data_start,
                        "file_size": header.file_size,
                        "metadata": None if header.metadata is None else dict(header.metadata),
                    }
                    for name, header in checkpoint.files.items()
                ],
                "tensors": [{**_tensor_document(t), "file": owners[t.name]} for t in tensors],
                "totals": _totals(tensors),
                "problems": [_finding_document(p) for p in checkpoint.problems],
                "other_files": read.other_files,
                "error": None,
            }
        )
        return
    if not first:
        out.line()
    out.line(
        f"{read.source}: {_count(len(checkpoint.files), 'file')}, "
        f"{_count(len(checkpoint.tensors), 'tensor')}"
    )
    if checkpoint.metadata is not None:
        out.line(f"index metadata ({len(checkpoint.metadata):,}):")
        for key, value in checkpoint.metadata.items():
            out.line(f"  {out.shown(str(key))}: {_cut(out.shown(_value(value)), _SHOWN_VALUE)}")
    for problem in checkpoint.problems:
        out.line(f"warning: {problem.kind}: {problem.message}")
    if read.other_files:
        out.line(f"note: also in the directory, not read: {_listed(read.other_files)}")
    rows = [
        (
            out.shown(t.name),
            t.dtype,
            shown_shape(t.shape),
            out.shown(owners[t.name]),
            f"{t.nbytes:,}",
        )
        for t in tensors
    ]
    _columns(out, ("name", "dtype", "shape", "file", "size"), rows, right=(4,), shrink=(0, 3))
    _totals_table(out, _totals(tensors))


def _value(value: object) -> str:
    """An index metadata value for people: numbers grouped (``90,857,060``), else JSON."""
    if type(value) is int:
        return f"{value:,}"
    if type(value) is str:
        return value
    return json.dumps(value, ensure_ascii=False)


def _document(source: str, header: Header, tensors: list[TensorInfo]) -> dict[str, object]:
    """The --json schema (documented in the README; keep it stable)."""
    return {
        "path": source,
        "header_size": header.header_size,
        "data_start": header.data_start,
        "file_size": header.file_size,
        "metadata": None if header.metadata is None else dict(header.metadata),
        "tensors": [_tensor_document(t) for t in tensors],
        "totals": _totals(tensors),
        "error": None,
    }


def _tensor_document(t: TensorInfo) -> dict[str, object]:
    return {
        "name": t.name,
        "dtype": t.dtype,
        "shape": list(t.shape),
        "data_offsets": list(t.data_offsets),
        "start": t.start,
        "end": t.end,
        "nbytes": t.nbytes,
    }


def _finding_document(finding: Finding) -> dict[str, object]:
    return {"kind": finding.kind, "message": finding.message, "tensor": finding.tensor}


def _totals(tensors: Iterable[TensorInfo]) -> dict[str, Any]:
    """The --json "totals": counts, elements and bytes, in all and per dtype."""

    per_dtype = {
        dtype: {"tensors": total.tensors, "numel": total.numel, "nbytes": total.nbytes}
        for dtype, total in by_dtype(tensors).items()
    }
    return {
        "tensors": sum(row["tensors"] for row in per_dtype.values()),
        "numel": sum(row["numel"] for row in per_dtype.values()),
        "nbytes": sum(row["nbytes"] for row in per_dtype.values()),
        "by_dtype": per_dtype,
    }


def _table(out: _Output, source: str, header: Header, tensors: list[TensorInfo]) -> None:
    size = "unknown" if header.file_size is None else f"{header.file_size:,}"
    out.line(
        f"{source}: {_count(len(header.tensors), 'tensor')}, header {header.header_size:,} "
        f"bytes, data at {header.data_start:,}, file {size} bytes"
    )
    if header.metadata is not None:
        out.line(f"metadata ({len(header.metadata):,}):")
        for key, value in header.metadata.items():
            out.line(f"  {out.shown(key)}: {_cut(out.shown(value), _SHOWN_VALUE)}")
    rows = [
        (
            out.shown(t.name),
            t.dtype,
            shown_shape(t.shape),
            f"{t.start:,}-{t.end:,}",
            f"{t.nbytes:,}",
        )
        for t in tensors
    ]
    _columns(out, ("name", "dtype", "shape", "bytes in file", "size"), rows, right=(4,))
    _totals_table(out, _totals(tensors))
    out.line("(bytes in file: absolute offsets, start-end, end exclusive)")


def _totals_table(out: _Output, totals: dict[str, Any]) -> None:
    # For people: "parameters" and "bytes" (the --json keys are numel and nbytes).
    out.line(
        f"total: {_count(totals['tensors'], 'tensor')}, {_count(totals['numel'], 'parameter')}, "
        f"{_count(totals['nbytes'], 'byte')}"
    )
    summary = [
        (dtype, f"{row['tensors']:,}", f"{row['numel']:,}", f"{row['nbytes']:,}")
        for dtype, row in totals["by_dtype"].items()
    ]
    if len(summary) > 1:
        _columns(out, ("dtype", "tensors", "parameters", "bytes"), summary, right=(1, 2, 3))


# --- validate -----------------------------------------------------------------------------


class _Verdict:
    """What validate found out about one source."""

    def __init__(self, source: str, *, strict: bool) -> None:
        self.source = source
        self.strict = strict
        self.tensors: int | None = None
        self.failure: _Failure | None = None
        self.findings: list[Finding] = []  # of the strict audit
        self.problems: list[Finding] = []  # of a checkpoint: warnings, failures when strict
        self.other_files: list[str] = []

    @property
    def valid(self) -> bool:
        if self.failure is not None or self.findings:
            return False
        return not (self.strict and self.problems)

    def document(self) -> dict[str, object]:
        return {
            "path": self.source,
            "valid": self.valid,
            "tensors": self.tensors,
            "error": None if self.failure is None else self.failure.document(),
            "findings": [_finding_document(finding) for finding in self.findings],
            "problems": [_finding_document(problem) for problem in self.problems],
            "other_files": self.other_files,
        }

    def lines(self) -> list[str]:
        where = _shown_source(self.source)
        if self.failure is not None:
            return [f"{where}: {self.failure.text()}"]
        strict = [*self.findings, *self.problems] if self.strict else self.findings
        warnings = [] if self.strict else self.problems
        if strict:
            first = f"{where}: strict: {_count(len(strict), 'finding')}"
        else:
            first = f"{where}: ok ({_count(self.tensors or 0, 'tensor')})"
            if warnings:
                first += f", {_count(len(warnings), 'warning')}"
        return [
            first,
            *(f"{where}: strict: {finding.kind}: {finding.message}" for finding in strict),
            *(f"{where}: warning: {problem.kind}: {problem.message}" for problem in warnings),
            *(
                [f"{where}: note: also in the directory, not read: {_listed(self.other_files)}"]
                if self.other_files
                else []
            ),
        ]


def _validate(args: argparse.Namespace, out: _Output, err: _Output) -> int:
    status = 0
    for source in args.sources:
        verdict = _Verdict(source, strict=args.strict)
        try:
            _check(verdict, _read(source, "validate"))
        except _Failure as failure:
            verdict.failure = failure
        if not verdict.valid:
            status = 1
        if args.json:
            out.json(verdict.document())
        else:
            for line in verdict.lines():
                out.line(line)
    return status


def _check(verdict: _Verdict, read: _Read) -> None:
    verdict.tensors = len(read.tensors)
    verdict.other_files = read.other_files
    if read.checkpoint is not None:
        verdict.problems = list(read.checkpoint.problems)
    if not verdict.strict:
        return
    from ._audit import Finding, audit_header  # only --strict needs it

    for name, header in read.headers.items():
        prefix = _header_bytes(read, name, header)
        try:
            found = audit_header(prefix, file_size=header.file_size)
        except HeaderError as error:  # the file changed since it was read
            raise _failure(error, read.source) from None
        if read.checkpoint is not None:  # say which shard
            found = [Finding(f.kind, f"{name}: {f.message}", f.tensor) for f in found]
        verdict.findings += found


# --- diff ---------------------------------------------------------------------------------


def _diff(args: argparse.Namespace, out: _Output, err: _Output) -> int:
    sides = [_read_side(source, err) for source in (args.a, args.b)]
    for source, side in zip((args.a, args.b), sides, strict=True):
        if isinstance(side, _Failure):
            if args.json:
                error = {"path": source, **side.document()}
                out.json({"a": args.a, "b": args.b, "same_tensors": None, "error": error})
            return 2
    a, b = sides
    assert isinstance(a, _Read)
    assert isinstance(b, _Read)
    difference = _Difference(a, b)
    if args.json:
        out.json(difference.document())
    else:
        difference.write(out)
    return 0 if difference.same_tensors else 1


def _read_side(source: str, err: _Output) -> _Read | _Failure:
    """One side of a diff, or why it cannot be read (said on stderr)."""
    try:
        return _read(source, "diff")
    except _Failure as failure:
        err.line(f"{_PROG}: {_shown_source(source)}: {failure.text()}")
        return failure


def _merged_metadata(read: _Read) -> dict[str, str]:
    """The files' ``__metadata__``: a checkpoint's shards merged, the first shard's value kept."""
    merged: dict[str, str] = {}
    for header in read.headers.values():
        for key, value in (header.metadata or {}).items():
            merged.setdefault(key, value)
    return merged


def _brief(t: TensorInfo) -> dict[str, object]:
    return {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "nbytes": t.nbytes}


class _Difference:
    """What tells B from A, by their headers."""

    def __init__(self, a: _Read, b: _Read) -> None:
        self.a, self.b = a, b
        tensors_a, tensors_b = a.tensors, b.tensors
        self.removed = [t for name, t in tensors_a.items() if name not in tensors_b]
        self.added = [t for name, t in tensors_b.items() if name not in tensors_a]
        self.changed: list[tuple[TensorInfo, TensorInfo, list[str]]] = []
        for name, before in tensors_a.items():
            after = tensors_b.get(name)
            if after is None:
                continue
            fields = [
                field
                for field in ("dtype", "shape", "nbytes")
                if getattr(before, field) != getattr(after, field)
            ]
            if fields:
                self.changed.append((before, after, fields))
        meta_a, meta_b = _merged_metadata(a), _merged_metadata(b)
        self.meta_removed = {k: v for k, v in meta_a.items() if k not in meta_b}
        self.meta_added = {k: v for k, v in meta_b.items() if k not in meta_a}
        self.meta_changed = {
            k: (v, meta_b[k]) for k, v in meta_a.items() if k in meta_b and meta_b[k] != v
        }
        self.totals_a, self.totals_b = _totals(tensors_a.values()), _totals(tensors_b.values())

    @property
    def same_tensors(self) -> bool:
        return not (self.removed or self.added or self.changed)

    def document(self) -> dict[str, object]:
        return {
            "a": self.a.source,
            "b": self.b.source,
            "same_tensors": self.same_tensors,
            "added": [_brief(t) for t in self.added],
            "removed": [_brief(t) for t in self.removed],
            "changed": [
                {"name": before.name, "changes": fields, "a": _brief(before), "b": _brief(after)}
                for before, after, fields in self.changed
            ],
            "metadata": {
                "added": self.meta_added,
                "removed": self.meta_removed,
                "changed": {k: {"a": va, "b": vb} for k, (va, vb) in self.meta_changed.items()},
            },
            "totals": {"a": self.totals_a, "b": self.totals_b},
            "error": None,
        }

    def write(self, out: _Output) -> None:
        for label, read in (("a", self.a), ("b", self.b)):
            out.line(
                f"{label}: {_shown_source(read.source)} ({_count(len(read.headers), 'file')}, "
                f"{_count(len(read.tensors), 'tensor')})"
            )
        if self.same_tensors:
            out.line(f"tensors: the same {len(self.a.tensors):,} (names, dtypes and shapes)")
        else:
            out.line(
                f"tensors: {len(self.changed):,} changed, {len(self.added):,} added, "
                f"{len(self.removed):,} removed"
            )
        metadata = (self.meta_changed, self.meta_added, self.meta_removed)
        if any(metadata):
            out.line(
                f"metadata: {len(self.meta_changed):,} changed, {len(self.meta_added):,} added, "
                f"{len(self.meta_removed):,} removed"
            )
        else:
            out.line("metadata: the same")
        self._write_tensors(out)
        if any(metadata):
            out.line()
            self._write_metadata(out)
        out.line()
        self._write_totals(out)

    def _write_tensors(self, out: _Output) -> None:
        if self.same_tensors:
            return

        def both(before: str, after: str) -> str:
            return before if before == after else f"{before} -> {after}"

        rows = [
            (
                "~",
                out.shown(before.name),
                both(before.dtype, after.dtype),
                both(shown_shape(before.shape), shown_shape(after.shape)),
                both(f"{before.nbytes:,}", f"{after.nbytes:,}"),
            )
            for before, after, _ in self.changed
        ]
        for sign, tensors in (("-", self.removed), ("+", self.added)):
            rows += [
                (sign, out.shown(t.name), t.dtype, shown_shape(t.shape), f"{t.nbytes:,}")
                for t in tensors
            ]
        out.line()
        _columns(out, ("", "name", "dtype", "shape", "bytes"), rows, right=(4,), shrink=(1,))

    def _write_metadata(self, out: _Output) -> None:
        def shown(value: str | None) -> str:
            return "-" if value is None else _cut(out.shown(value), _SHOWN_DIFF_VALUE)

        rows = [
            ("~", out.shown(key), shown(before), shown(after))
            for key, (before, after) in self.meta_changed.items()
        ]
        rows += [
            ("-", out.shown(key), shown(value), "-") for key, value in self.meta_removed.items()
        ]
        rows += [("+", out.shown(key), "-", shown(value)) for key, value in self.meta_added.items()]
        _columns(out, ("", "metadata key", "a", "b"), rows, shrink=(1, 2, 3))

    def _write_totals(self, out: _Output) -> None:
        per_a, per_b = self.totals_a["by_dtype"], self.totals_b["by_dtype"]
        nothing = {"tensors": 0, "numel": 0, "nbytes": 0}
        rows = [
            _totals_row(dtype, per_a.get(dtype, nothing), per_b.get(dtype, nothing))
            for dtype in sorted({*per_a, *per_b})
        ]
        rows.append(_totals_row("all", self.totals_a, self.totals_b))
        _columns(
            out,
            ("dtype", "tensors (a -> b)", "parameters (a -> b)", "bytes (a -> b)"),
            rows,
            right=(1, 2, 3),
            shrink=(),
        )


def _totals_row(dtype: str, a: Mapping[str, int], b: Mapping[str, int]) -> tuple[str, ...]:
    def both(key: str) -> str:
        return f"{a[key]:,}" if a[key] == b[key] else f"{a[key]:,} -> {b[key]:,}"

    return (dtype, both("tensors"), both("numel"), both("nbytes"))
