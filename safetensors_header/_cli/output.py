"""Terminal output: text escaped, any encoding, a closed pipe survived; tables fitted.

Layer: adapters (the command line).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence

from .._core.diagnose import cut, listed

__all__ = ["DIGITS", "PROG", "STDIN", "Output", "count", "cut", "listed", "middle_cut"]
__all__ += ["shown_source", "unshown"]
__all__ += ["natural_key", "shard_numbers"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final, TextIO


PROG: Final = "safetensors-header"


STDIN: Final = "-"  # the SOURCE that means standard input


_STDIN_SHOWN: Final = "<stdin>"


_UNKNOWN_WIDTH: Final = 80  # a terminal's width when neither it nor COLUMNS says (as shutil's)


# (Patterns, compiled when first used, by re's own cache: a command that prints only
# printable names compiles none.)
# The characters a line is checked for: anything but printable ASCII. Printable ones (é, emoji)
# stay when the output can encode them; the rest (C0, DEL, C1, bidi controls, U+2028/2029,
# lone surrogates...) are written as escapes.
_NOT_PRINTABLE_ASCII: Final = r"[^\x20-\x7e]"
# What text escapes: the above, and the backslash that starts every escape (so that a name
# holding ``\x1b`` as four characters never prints as one holding ESC does).
_ESCAPED_IN_TEXT: Final = r"[^\x20-\x5b\x5d-\x7e]"


_LINES_PER_WRITE: Final = 1024  # lines written at a time


#: The runs of digits in a name (a layer's number, a shard's).
DIGITS: Final = r"[0-9]+"


# A shard's name as transformers writes it: model-00001-of-00004.safetensors.
_SHARD_NAME: Final = r"(.*-)0*([0-9]+)(-of-0*[0-9]+)(\..*)"


# As repr() writes them.
_SHORT_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


class Output:
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
        self.wide = False  # --wide: nothing cut to the terminal's width
        # Colour on a terminal, unless NO_COLOR (https://no-color.org) or a dumb terminal.
        self.color = (
            self.tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        )

    def _encodes(self, char: str) -> bool:
        if self._unicode:
            return True  # a lone surrogate is not printable: escaped before this is asked
        try:
            char.encode(self.encoding)
        except UnicodeEncodeError:
            return False
        return True

    def shown(self, text: str) -> str:
        """A value from a file or a server (a name, a key), for a row: every character that
        is not printable, or not encodable, escaped, and the backslash too, so that no two
        values print alike (``a`` and ESC, ``a\\x1b``)."""
        if text.isascii() and text.isprintable() and "\\" not in text:
            return text  # the common case, checked in C
        return re.sub(_ESCAPED_IN_TEXT, self._text_escape, text)

    def safe(self, text: str) -> str:
        """A line for the terminal: every character that is not printable, or not encodable,
        escaped, and nothing else (what `shown` made of values, or a message whose values
        its repr escaped, is left as it is)."""
        if text.isascii() and text.isprintable():
            return text  # the common case, checked in C
        return re.sub(_NOT_PRINTABLE_ASCII, self._text_escape, text)

    def _text_escape(self, match: re.Match[str]) -> str:
        char = match[0]
        if char.isprintable() and char != "\\" and self._encodes(char):
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
        """Write `text`, made `safe`, and a newline."""
        self.write(self.safe(text) + "\n")

    def painted(self, *parts: tuple[str, str | None]) -> None:
        """Write a line of ``(text, style)`` parts, each escaped, a styled part in its colour
        where `color` is on (`STYLES`: "added", "removed", "changed", "diagnosis")."""
        shown = [
            self.safe(text) if style is None or not self.color else _paint(self.safe(text), style)
            for text, style in parts
        ]
        self.write("".join(shown) + "\n")

    def lines(self, texts: Iterable[str]) -> None:
        """`line` for each of `texts`, written a batch at a time (stops when nobody reads)."""
        batch: list[str] = []
        for text in texts:
            batch.append(text)
            if len(batch) == _LINES_PER_WRITE:
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
            text = "".join(self.safe(line) + "\n" for line in texts)
        self.write(text)

    def json(self, document: object) -> None:
        """Write `document` as one line of JSON, escaped as `shown` does, in JSON's escapes.

        On an output that is not UTF-8, every non-ASCII character is escaped: the line is
        then ASCII, which is UTF-8 as JSON must be, whatever the output's encoding.
        """
        if isinstance(document, dict) and isinstance(document.get("path"), str):
            document = {**document, "path": without_secrets(document["path"])}
        text = json.dumps(document, ensure_ascii=False)
        if not (text.isascii() and text.isprintable()):
            # Outside strings JSON text is printable ASCII, so every match is in a string.
            text = re.sub(_NOT_PRINTABLE_ASCII, self._json_escape, text)
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

    def heading(self, source: str, facts: str) -> None:
        """``SOURCE: facts``; on a terminal too narrow for that, the source on a line of its
        own (cut in the middle if it must be) and the facts on the next."""
        line = f"{self.safe(source)}: {facts}"
        if not self.tty or self.wide or len(line) <= self.width():
            return self.line(line)
        width = self.width()
        self.line(middle_cut(self.safe(source), max(width - 1, 12), self.ellipsis) + ":")
        return self.line(f"  {facts}")

    def width(self) -> int:
        """COLUMNS if set (as shutil has it, without importing shutil), else the terminal's."""
        try:
            columns = int(os.environ["COLUMNS"])
        except (KeyError, ValueError):
            columns = 0
        if columns > 0:
            return columns
        try:
            columns = os.get_terminal_size(self._stream.fileno()).columns
        except (OSError, ValueError):
            return _UNKNOWN_WIDTH
        # A terminal that reports 0 columns (`script`, many CI and container terminals) does
        # not know its width.
        return columns if columns > 0 else _UNKNOWN_WIDTH


class Progress:
    """Progress on stderr for a person waiting: ``shard headers read: 12/40``, rewritten in
    place, shown only when stderr is a terminal, --quiet was not given and the work has
    taken a second; cleared when it is done. Its methods are the library's ``progress``
    callbacks (called one at a time). Used as a context manager: the line is cleared on the
    way out, before anything else is printed."""

    def __init__(self, err: Output, *, quiet: bool) -> None:
        import time

        self._err = err
        self._clock = time.monotonic
        self._enabled = err.tty and not quiet
        self._started = self._clock()
        self._last = 0.0
        self._shown = False

    def shards(self, done: int, total: int) -> None:
        self._show(f"shard headers read: {done:,}/{total:,}", done == total)

    def bytes(self, done: int, total: int) -> None:
        self._show(f"hashed: {human_bytes(done)} of {human_bytes(total)}", done == total)

    def _show(self, text: str, last: bool) -> None:
        if not self._enabled:
            return
        now = self._clock()
        if now - self._started < 1.0 or (now - self._last < 0.1 and not last):
            return
        self._last = now
        self._shown = True
        self._err.write(f"\r{self._err.safe(text)}\x1b[K")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_: object) -> None:
        if self._shown:  # clear the line it was showing
            self._err.write("\r\x1b[K")
            self._shown = False


#: The colours of the styles `Output.painted` knows (SGR codes).
STYLES: Final = {"added": "32", "removed": "31", "changed": "33", "diagnosis": "1"}


def _paint(text: str, style: str) -> str:
    return f"\x1b[{STYLES[style]}m{text}\x1b[0m"


def human_count(number: int) -> str:
    """A count for people, three digits: ``950``, ``22.7 K``, ``6.74 B`` (thousand, million,
    billion, trillion: the units of parameter counts)."""
    if number < 1000:
        return str(number)
    value = float(number)
    for unit in ("K", "M", "B", "T"):
        value /= 1000
        if value < 999.5 or unit == "T":
            return f"{_three_digits(value)} {unit}"
    raise AssertionError("unreachable")


def human_bytes(number: int) -> str:
    """A size for people, three digits, in binary units: ``512 B``, ``86.6 MiB``, ``12.6
    GiB``."""
    if number < 1024:
        return f"{number} B"
    value = float(number)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 999.5 or unit == "PiB":
            return f"{_three_digits(value)} {unit}"
    raise AssertionError("unreachable")


def _three_digits(value: float) -> str:
    return f"{value:.2f}" if value < 9.995 else f"{value:.1f}" if value < 99.95 else f"{value:.0f}"


def natural_key(text: str) -> tuple[tuple[str, int, str], ...]:
    """A sort key that puts numbers in number order: ``layers.2`` before ``layers.10``."""
    parts = re.split(DIGITS, text)
    numbers = re.findall(DIGITS, text)
    # A number by its length then its digits (no int(): a name may hold 5,000 of them).
    return tuple(
        (part, len(number.lstrip("0")), number.lstrip("0"))
        for part, number in zip(parts, [*numbers, ""], strict=True)
    )


def shard_numbers(files: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """A short number for each of a checkpoint's files, and the legend that says which is
    which: ``file 1: model-00001-of-00004.safetensors``, or for more than 3 files named as
    transformers names them, one line (``files 1-30: model-00001-of-00030.safetensors to
    model-00030-of-00030.safetensors``), the numbers then the files' own."""
    numbers = {name: str(number) for number, name in enumerate(files, start=1)}
    series = [re.fullmatch(_SHARD_NAME, name) for name in files]
    if len(files) > 3 and all(series):
        first, last = series[0], series[-1]
        assert first is not None
        assert last is not None
        if all(
            match is not None
            and int(match[2]) == number
            and (match[1], match[3], match[4]) == (first[1], first[3], first[4])
            for number, match in enumerate(series, start=1)
        ):
            return numbers, [f"files 1-{len(files)}: {files[0]} to {files[-1]}"]
    return numbers, [f"file {numbers[name]}: {name}" for name in files]


def count(number: int, noun: str) -> str:
    """``1 file``, ``2 files``, ``1,000 files``."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def middle_cut(text: str, width: int, ellipsis: str) -> str:
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
    for match in (*re.finditer(DIGITS, text), None):
        gap_end = len(text) - least if match is None else min(match.start(), len(text) - least)
        if gap_end - gap_start >= cut:  # a run of this gap leaves the digits in
            nearest = min(max(centred, gap_start), gap_end - cut)
            if abs(nearest - centred) < distance:
                start, distance = nearest, abs(nearest - centred)
        if match is not None:
            gap_start = max(match.end(), least)
    return text[:start] + ellipsis + text[start + cut :]


def unshown(text: str) -> str:
    """`Output.shown`'s escapes undone: a value as it was before it was printed (`hash`'s
    lines read back by ``validate --hashes``)."""
    if "\\" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        escape = match[0]
        if len(escape) == 2:
            return _UNSHORT[escape]
        return chr(int(escape[2:], 16))

    return re.sub(r"\\(?:[\\nrt]|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})", one, text)


_UNSHORT: Final = {escape: char for char, escape in _SHORT_ESCAPES.items()}


def shown_source(source: str) -> str:
    """A source as the command line shows it: a URL without its secrets, standard input by
    name."""
    return _STDIN_SHOWN if source == STDIN else without_secrets(source)


def without_secrets(source: str) -> str:
    """A URL without its user info or query (a password, a signature); anything else as it
    is."""
    if "://" in source and ("@" in source or "?" in source):
        from .._sources.urls import redact

        return redact(source)
    return source
