"""The command line: ``python -m safetensors_header inspect FILE...``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from ._errors import HeaderError
from ._header import Header
from ._sources import read_header

__all__ = ["main"]

_PROG = "safetensors-header"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 a bad file, 2 usage)."""
    parser = argparse.ArgumentParser(
        prog=_PROG, description="Read the header of safetensors files without loading them."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    inspect = commands.add_parser(
        "inspect", help="list the tensors and metadata of each file", description=None
    )
    inspect.add_argument("files", nargs="+", metavar="FILE", help="a .safetensors file")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    try:
        return _inspect(args.files, as_json=args.json, out=sys.stdout)
    except BrokenPipeError:
        # `... | head`: the reader went away; exit quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _inspect(files: Sequence[str], *, as_json: bool, out: TextIO) -> int:
    status = 0
    for index, path in enumerate(files):
        try:
            header = read_header(path)
        except (HeaderError, OSError) as error:
            kind = error.kind if isinstance(error, HeaderError) else type(error).__name__
            detail = error.strerror if isinstance(error, OSError) else str(error)
            print(f"{_PROG}: {path}: {kind}: {detail}", file=sys.stderr)
            status = 1
            continue
        if as_json:
            json.dump(_as_dict(path, header), out, ensure_ascii=False)
            out.write("\n")
        else:
            if index:
                out.write("\n")
            _print_table(path, header, out)
    return status


def _as_dict(path: str, header: Header) -> dict[str, object]:
    return {
        "path": path,
        "header_size": header.header_size,
        "data_start": header.data_start,
        "file_size": header.file_size,
        "metadata": None if header.metadata is None else dict(header.metadata),
        "tensors": [
            {
                "name": t.name,
                "dtype": t.dtype,
                "shape": list(t.shape),
                "data_offsets": list(t.data_offsets),
                "start": t.start,
                "end": t.end,
                "nbytes": t.nbytes,
            }
            for t in header.tensors.values()
        ],
    }


def _print_table(path: str, header: Header, out: TextIO) -> None:
    out.write(
        f"{path}: {len(header.tensors)} tensors, header {header.header_size:,} bytes, "
        f"data at {header.data_start:,}, file {header.file_size:,} bytes\n"
    )
    if header.metadata is not None:
        out.write("metadata:\n")
        for key, value in header.metadata.items():
            out.write(f"  {key}: {_one_line(value)}\n")
    rows = [
        (
            _one_line(t.name),
            t.dtype,
            "[" + ", ".join(map(str, t.shape)) + "]",
            f"{t.start}-{t.end}",
            f"{t.nbytes:,}",
        )
        for t in header.tensors.values()
    ]
    titles = ("name", "dtype", "shape", "bytes in file", "size")
    widths = [max(map(len, column), default=0) for column in zip(titles, *rows, strict=False)]
    for row in (titles, *rows):
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=False)]
        out.write("  ".join((*cells, row[-1].rjust(widths[-1]))).rstrip() + "\n")


def _one_line(text: str, limit: int = 200) -> str:
    """Control characters shown escaped, long values cut: one terminal line per row."""
    shown = json.dumps(text, ensure_ascii=False)[1:-1] if not text.isprintable() else text
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
