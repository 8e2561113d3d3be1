"""Terminal output: text escaped, any encoding, a closed pipe survived; tables fitted.

Layer: adapters (the command line).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence

from .._diagnose import cut, listed

__all__ = ["PROG", "STDIN", "Output", "columns", "count", "cut", "listed", "shown_source"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final, TextIO


PROG: Final = "safetensors-header"


STDIN: Final = "-"  # the SOURCE that means standard input


_STDIN_SHOWN: Final = "<stdin>"


_NARROWEST: Final = 12  # a column cut to fit the terminal keeps at least this many characters


# The characters a line is checked for: anything but printable ASCII. Printable ones (é, emoji)
# stay when the output can encode them; the rest (C0, DEL, C1, bidi controls, U+2028/2029,
# lone surrogates...) are written as escapes.
_NOT_PRINTABLE_ASCII: Final = re.compile(r"[^\x20-\x7e]")


_LINES_PER_WRITE: Final = 1024  # lines written at a time


_DIGITS: Final = re.compile(r"[0-9]+")


_SHORT_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}  # as repr() writes them


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


def count(number: int, noun: str) -> str:
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


def columns(
    out: Output,
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


def shown_source(source: str) -> str:
    return _STDIN_SHOWN if source == STDIN else source
