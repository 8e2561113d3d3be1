"""The command line: ``safetensors-header inspect|validate SOURCE...``.

Output goes to stdout; errors to stderr, one line each, never a traceback. Exit status: 0 when
every source was read (and, for ``validate``, is valid), 1 when any was not, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import errno
import fnmatch
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence

from ._errors import HeaderError
from ._header import Header, TensorInfo
from ._sources import is_url, read_header

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, TextIO

    from ._audit import Finding

__all__ = ["main"]

_PROG = "safetensors-header"
_SORT_KEYS: dict[str, Callable[[TensorInfo], tuple[int, str]]] = {
    "offset": lambda t: (t.start, ""),
    "name": lambda t: (0, t.name),
    "size": lambda t: (-t.nbytes, t.name),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default: ``sys.argv[1:]``); return the exit status."""
    args = _argument_parser().parse_args(argv)
    try:
        if args.command == "inspect":
            return _inspect(args, sys.stdout)
        return _validate(args, sys.stdout)
    except BrokenPipeError:
        # `... | head`: the reader went away. Exit quietly, as Unix tools do, and keep Python
        # from complaining when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG, description="Read the headers of safetensors files without loading them."
    )
    # prog= given: argparse would otherwise build a help formatter (and import shutil) now.
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", prog=_PROG)
    inspect = commands.add_parser(
        "inspect",
        help="show the tensors, metadata and totals of each file",
        description="Show each file's header facts, metadata, tensors and totals.",
    )
    inspect.add_argument("sources", nargs="+", metavar="SOURCE", help="a .safetensors file")
    inspect.add_argument("--json", action="store_true", help="one JSON document per file")
    inspect.add_argument(
        "--sort", choices=sorted(_SORT_KEYS), default="offset", help="tensor order (offset)"
    )
    inspect.add_argument(
        "--filter", metavar="GLOB", help="only tensors whose name matches, e.g. '*.bias'"
    )
    validate = commands.add_parser(
        "validate",
        help="check each file; one line per file",
        description="Check each file as the reference implementation would; with --strict, "
        "also report what it accepts but a careful reader should not.",
    )
    validate.add_argument("sources", nargs="+", metavar="SOURCE", help="a .safetensors file")
    validate.add_argument("--strict", action="store_true", help="add the strict audit")
    validate.add_argument("--json", action="store_true", help="one JSON object per line")
    return parser


# --- inspect ------------------------------------------------------------------------------


def _inspect(args: argparse.Namespace, out: TextIO) -> int:
    status = 0
    for index, source in enumerate(args.sources):
        try:
            if _is_checkpoint(source):
                _inspect_checkpoint(args, source, out, first=not index)
                continue
            header = read_header(source)
        except (HeaderError, OSError) as error:
            _report(source, error)
            status = 1
            continue
        tensors = _shown_tensors(args, header.tensors.values())
        if args.json:
            out.write(json.dumps(_document(source, header, tensors), ensure_ascii=False) + "\n")
        else:
            if index:
                out.write("\n")
            _table(source, header, tensors, out)
    return status


def _is_checkpoint(source: str) -> bool:
    """An index JSON (local or a URL) or a directory: read with read_checkpoint."""
    return source.endswith(".json") or (not is_url(source) and os.path.isdir(source))


def _shown_tensors(
    args: argparse.Namespace, tensors: Iterable[TensorInfo], *, offsets_comparable: bool = True
) -> list[TensorInfo]:
    """The tensors matching --filter, in the --sort order."""
    if args.filter is not None:
        tensors = [t for t in tensors if fnmatch.fnmatchcase(t.name, args.filter)]
    if args.sort == "offset" and not offsets_comparable:
        return list(tensors)  # offsets of different shards do not compare
    return sorted(tensors, key=_SORT_KEYS[args.sort])


def _inspect_checkpoint(args: argparse.Namespace, source: str, out: TextIO, *, first: bool) -> None:
    from ._checkpoint import read_checkpoint

    checkpoint = read_checkpoint(source)
    owners = {name: file for file, header in checkpoint.files.items() for name in header.tensors}
    # In offset order, shard by shard: the tensors are in shard order already.
    tensors = _shown_tensors(args, checkpoint.tensors.values(), offsets_comparable=False)
    if args.json:
        document = {
            "path": source,
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
            "problems": [
                {"kind": p.kind, "message": p.message, "tensor": p.tensor}
                for p in checkpoint.problems
            ],
        }
        out.write(json.dumps(document, ensure_ascii=False) + "\n")
        return
    if not first:
        out.write("\n")
    out.write(f"{source}: {len(checkpoint.files):,} files, {len(checkpoint.tensors):,} tensors\n")
    if checkpoint.metadata is not None:
        out.write(f"index metadata ({len(checkpoint.metadata)}):\n")
        for key, value in checkpoint.metadata.items():
            out.write(f"  {_one_line(str(key))}: {_one_line(json.dumps(value))}\n")
    for problem in checkpoint.problems:
        out.write(f"problem: {problem.kind}: {problem.message}\n")
    _tensor_table(tensors, "file", lambda t: _one_line(owners[t.name]), out)


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


def _totals(tensors: Iterable[TensorInfo]) -> dict[str, Any]:
    """The --json "totals": counts, elements and bytes, in all and per dtype."""
    from ._checkpoint import by_dtype  # the one tally, shared with Checkpoint.by_dtype

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


def _table(source: str, header: Header, tensors: list[TensorInfo], out: TextIO) -> None:
    size = "unknown" if header.file_size is None else f"{header.file_size:,}"
    out.write(
        f"{source}: {len(header.tensors):,} tensors, header {header.header_size:,} bytes, "
        f"data at {header.data_start:,}, file {size} bytes\n"
    )
    if header.metadata is not None:
        out.write(f"metadata ({len(header.metadata)}):\n")
        for key, value in header.metadata.items():
            out.write(f"  {_one_line(key)}: {_one_line(value)}\n")
    _tensor_table(tensors, "bytes in file", lambda t: f"{t.start:,}-{t.end:,}", out)


def _tensor_table(
    tensors: list[TensorInfo], where: str, place: Callable[[TensorInfo], str], out: TextIO
) -> None:
    """A row per tensor (its place in the column titled `where`), then the totals."""
    rows = [
        (
            _one_line(t.name),
            t.dtype,
            "[" + ", ".join(map(str, t.shape)) + "]",
            place(t),
            f"{t.nbytes:,}",
        )
        for t in tensors
    ]
    _write_columns(("name", "dtype", "shape", where, "size"), rows, out, right=(4,))
    _totals_table(_totals(tensors), out)


def _totals_table(totals: dict[str, Any], out: TextIO) -> None:
    # For people: "parameters" and "bytes" (the --json keys are numel and nbytes).
    out.write(
        f"total: {totals['tensors']:,} tensors, {totals['numel']:,} parameters, "
        f"{totals['nbytes']:,} bytes\n"
    )
    summary = [
        (dtype, f"{row['tensors']:,}", f"{row['numel']:,}", f"{row['nbytes']:,}")
        for dtype, row in totals["by_dtype"].items()
    ]
    if len(summary) > 1:
        _write_columns(("dtype", "tensors", "parameters", "bytes"), summary, out, right=(1, 2, 3))


def _terminal_width(out: TextIO) -> int:
    """COLUMNS if set (as shutil has it, without importing shutil), else the terminal's."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError):
        return 80


def _write_columns(
    titles: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    out: TextIO,
    *,
    right: tuple[int, ...],
) -> None:
    """Aligned columns; on a terminal the first column is cut to fit its width."""
    widths = [max(map(len, column)) for column in zip(titles, *rows, strict=False)]
    if out.isatty():
        room = _terminal_width(out) - sum(widths[1:]) - 2 * (len(widths) - 1)
        widths[0] = max(12, min(widths[0], room))
    for row in (titles, *rows):
        cells = []
        for index, (cell, width) in enumerate(zip(row, widths, strict=True)):
            shown = cell if len(cell) <= width else cell[: width - 1] + "…"
            cells.append(shown.rjust(width) if index in right else shown.ljust(width))
        out.write("  ".join(cells).rstrip() + "\n")


def _one_line(text: str, limit: int = 200) -> str:
    """Control characters shown escaped, long values cut: one terminal line per row."""
    shown = text if text.isprintable() else json.dumps(text, ensure_ascii=False)[1:-1]
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


# --- validate -----------------------------------------------------------------------------


def _validate(args: argparse.Namespace, out: TextIO) -> int:
    status = 0
    for source in args.sources:
        error: HeaderError | OSError | None = None
        findings: list[Finding] = []
        tensors = 0
        try:
            if _is_checkpoint(source):
                from ._checkpoint import read_checkpoint

                tensors = len(read_checkpoint(source, strict=args.strict).tensors)
            else:
                header = read_header(source)
                tensors = len(header.tensors)
                if args.strict:
                    findings = _audit_file(source, header)
        except (HeaderError, OSError) as caught:
            error = caught
        if error is not None or findings:
            status = 1
        if args.json:
            out.write(json.dumps(_verdict(source, error, findings), ensure_ascii=False) + "\n")
        elif error is not None:
            out.write(f"{source}: {_error_line(error)}\n")
        elif findings:
            more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
            out.write(f"{source}: strict: {findings[0].kind}: {findings[0].message}{more}\n")
        else:
            out.write(f"{source}: ok ({tensors:,} tensors)\n")
    return status


def _audit_file(source: str, header: Header) -> list[Finding]:
    from ._audit import audit_header  # only --strict needs it

    if is_url(source):
        raise OSError(errno.EOPNOTSUPP, "the strict audit reads local files only")
    with open(source, "rb") as file:
        prefix = file.read(header.data_start)
    return audit_header(prefix, file_size=header.file_size)


def _verdict(
    source: str, error: HeaderError | OSError | None, findings: list[Finding]
) -> dict[str, object]:
    described: dict[str, object] | None = None
    if isinstance(error, HeaderError):
        described = {
            "kind": error.kind,
            "message": error.message,
            "hint": error.hint,
            "tensor": error.tensor,
            "offset": error.offset,
        }
    elif error is not None:
        described = {"kind": type(error).__name__, "message": error.strerror or str(error)}
    return {
        "path": source,
        "valid": error is None and not findings,
        "error": described,
        "findings": [
            {"kind": finding.kind, "message": finding.message, "tensor": finding.tensor}
            for finding in findings
        ],
    }


def _error_line(error: HeaderError | OSError) -> str:
    if isinstance(error, HeaderError):
        return f"{error.kind}: {_one_line(str(error), 1000)}"
    return f"{type(error).__name__}: {error.strerror or error}"


def _report(source: str, error: HeaderError | OSError) -> None:
    print(f"{_PROG}: {source}: {_error_line(error)}", file=sys.stderr)
