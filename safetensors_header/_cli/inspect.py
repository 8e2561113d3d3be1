"""``inspect``: each source's header facts, metadata, tensors and totals.

Layer: adapters (the command line).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping

from .._core.header import Header, TensorInfo, shown_shape
from .columns import columns
from .documents import finding_document, tensor_document, totals
from .output import (
    PROG,
    Progress,
    count,
    cut,
    human_bytes,
    human_count,
    listed,
    natural_key,
    shard_numbers,
    shown_source,
)
from .reading import Failure, Read, read_source

__all__ = ["SORT_KEYS", "inspect_sources"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import argparse
    from typing import Any, Final

    from .._checkpoint import Checkpoint
    from .output import Output


_SHOWN_VALUE: Final = 200  # characters of a metadata value the text output shows


# Names in natural order: layer 2 before layer 10.
SORT_KEYS: Final[dict[str, Callable[[TensorInfo], tuple[int, Any]]]] = {
    "offset": lambda t: (t.start, ()),
    "name": lambda t: (0, natural_key(t.name)),
    "size": lambda t: (-t.nbytes, natural_key(t.name)),
}


def inspect_sources(args: argparse.Namespace, out: Output, err: Output) -> int:
    status = 0
    printed = False
    if args.world is not None and args.rank >= args.world:
        err.line(f"{PROG} inspect: --rank {args.rank} is not a rank of --world {args.world}")
        return 2
    for source in args.sources:
        try:
            with Progress(err, quiet=args.quiet) as progress:
                read = read_source(
                    source, "inspect", opened=args.world is not None, progress=progress.shards
                )
        except Failure as failure:
            status = 1
            failure.report(source, out, err, json=args.json)
            continue
        if out.closed:
            continue  # nobody reads the output: only the exit status is left to find out
        if args.world is not None:
            from .shares import shares_view

            if printed and not args.json:
                out.line()
            if not shares_view(args, read, out, err):
                status = 1
        elif args.tree:
            _tree_view(args, read, out, first=not printed)
        elif read.checkpoint is not None:
            _inspect_checkpoint(args, read, read.checkpoint, out, first=not printed)
        else:
            assert read.header is not None
            tensors = _shown_tensors(args, read.header.tensors.values())
            if args.json:
                out.json(_document(source, read.header, tensors))
            else:
                if printed:
                    out.line()
                offsets = args.offsets or not out.tty  # on a terminal, the names get the room
                _table(
                    out,
                    shown_source(source),
                    read.header,
                    tensors,
                    sizes=_sizes_of(args, out),
                    offsets=offsets,
                )
        printed = True
    return status


def _shown_tensors(
    args: argparse.Namespace, tensors: Iterable[TensorInfo], *, offsets_comparable: bool = True
) -> list[TensorInfo]:
    """The tensors matching --filter, in the --sort order."""
    if args.filter is not None:
        import fnmatch  # (here: --filter is rare, and a start pays for every import)

        tensors = [t for t in tensors if fnmatch.fnmatchcase(t.name, args.filter)]
    if args.sort == "offset" and not offsets_comparable:
        return list(tensors)  # offsets of different shards do not compare
    return sorted(tensors, key=SORT_KEYS[args.sort])


def _inspect_checkpoint(
    args: argparse.Namespace, read: Read, checkpoint: Checkpoint, out: Output, *, first: bool
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
                "tensors": [{**tensor_document(t), "file": owners[t.name]} for t in tensors],
                "totals": totals(tensors),
                "problems": [finding_document(p) for p in checkpoint.problems],
                "other_files": read.other_files,
                "error": None,
            }
        )
        return
    sizes = _sizes_of(args, out)
    if not first:
        out.line()
    out.heading(
        read.source,
        f"{count(len(checkpoint.files), 'file')}, {count(len(checkpoint.tensors), 'tensor')}",
    )
    if checkpoint.metadata is not None:
        _metadata_lines(out, "index metadata", checkpoint.metadata)
    for problem in checkpoint.problems:
        out.line(f"warning: {problem.kind}: {problem.message}")
    if read.other_files:
        out.line(f"note: also in the directory, not read: {listed(read.other_files)}")
    files = {name: out.shown(name) for name in checkpoint.files}
    dtypes = sorted({t.dtype for t in tensors})
    titles = ["name", "dtype", "shape", "file", "size"]
    if out.tty and not out.wide:  # on a terminal, the names get the room: files by number
        files, legend = shard_numbers(list(files))
        out.lines(legend)
        if len(dtypes) == 1:  # and one dtype said once, not on every row
            out.line(f"dtype: {dtypes[0]}, every tensor")
            titles.remove("dtype")
    if out.tty and args.sort == "offset":  # the offsets are not shown: by name, as people count
        tensors.sort(key=SORT_KEYS["name"])
    said = "dtype" not in titles
    rows = [
        (
            out.shown(t.name),
            *(() if said else (t.dtype,)),
            shown_shape(t.shape),
            files[owners[t.name]],
            sizes.bytes(t.nbytes),
        )
        for t in tensors
    ]
    last = len(titles) - 1
    columns(out, tuple(titles), rows, right=(last,), shrink=(0, last - 1))
    _totals_table(out, totals(tensors), sizes)


def _tree_view(args: argparse.Namespace, read: Read, out: Output, *, first: bool) -> None:
    """--tree: the tensors grouped by module, repeated blocks shown once."""
    from .model import describe_read, model_document, model_lines
    from .tree import tree_document, tree_of, tree_rows

    checkpoint = read.checkpoint
    everything = checkpoint.tensors if checkpoint is not None else read.header.tensors  # type: ignore[union-attr]
    tensors = _shown_tensors(args, everything.values(), offsets_comparable=False)
    root = tree_of(tensors)
    sums = totals(tensors)
    # Of every tensor, whatever --filter shows.
    model = describe_read(read, context=args.context, batch=args.batch)
    if args.json:
        out.json(
            {
                "path": read.source,
                "model": model_document(model),
                "tree": tree_document(root),
                "totals": sums,
                "error": None,
            }
        )
        return
    sizes = _sizes_of(args, out)
    if not first:
        out.line()
    files = "" if checkpoint is None else f" in {count(len(checkpoint.files), 'file')}"
    out.heading(
        shown_source(read.source),
        f"{count(len(tensors), 'tensor')}{files}, {sizes.total(sums['numel'], 'parameter')}, "
        f"{sizes.total(sums['nbytes'], 'byte')}",
    )
    model_lines(out, model, exact=sizes.exact)
    repeated = tree_rows(out, root, exact=sizes.exact)
    _totals_table(out, sums, sizes)
    if repeated:
        out.line("(a block xN: its numbers are those of all N; the rows below it, of one)")
    if not sizes.exact:
        out.line("(K, M, B: thousands, millions, billions; KiB, MiB, GiB: 1024, 1024^2, 1024^3)")


def _metadata_lines(out: Output, title: str, metadata: Mapping[str, object]) -> None:
    out.line(f"{title} ({len(metadata):,}):")
    for key, value in metadata.items():
        out.line(f"  {out.shown(str(key))}: {cut(out.shown(_value(value)), _SHOWN_VALUE)}")


def _value(value: object) -> str:
    """An index metadata value for people: numbers grouped (``90,857,060``), else JSON."""
    if type(value) is int:
        return f"{value:,}"
    if type(value) is str:
        return value
    return json.dumps(value, ensure_ascii=False)


def _document(source: str, header: Header, tensors: list[TensorInfo]) -> dict[str, object]:
    """The --json schema (documented in docs/cli.md; keep it stable)."""
    return {
        "path": source,
        "header_size": header.header_size,
        "data_start": header.data_start,
        "file_size": header.file_size,
        "metadata": None if header.metadata is None else dict(header.metadata),
        "tensors": [tensor_document(t) for t in tensors],
        "totals": totals(tensors),
        "error": None,
    }


def _table(
    out: Output,
    source: str,
    header: Header,
    tensors: list[TensorInfo],
    *,
    sizes: _Sizes,
    offsets: bool,
) -> None:
    size = "unknown" if header.file_size is None else f"{header.file_size:,}"
    out.heading(
        source,
        f"{count(len(header.tensors), 'tensor')}, header {header.header_size:,} bytes, data at "
        f"{header.data_start:,}, file {size} bytes",
    )
    if header.metadata is not None:
        _metadata_lines(out, "metadata", header.metadata)
    rows: list[tuple[str, ...]]
    if offsets:
        rows = [
            (
                out.shown(t.name),
                t.dtype,
                shown_shape(t.shape),
                f"{t.start:,}-{t.end:,}",
                sizes.bytes(t.nbytes),
            )
            for t in tensors
        ]
        columns(out, ("name", "dtype", "shape", "bytes in file", "size"), rows, right=(4,))
    else:
        rows = [
            (out.shown(t.name), t.dtype, shown_shape(t.shape), sizes.bytes(t.nbytes))
            for t in tensors
        ]
        columns(out, ("name", "dtype", "shape", "size"), rows, right=(3,))
    _totals_table(out, totals(tensors), sizes)
    if offsets:
        out.line("(bytes in file: absolute offsets, start-end, end exclusive)")


class _Sizes:
    """Numbers for people on a terminal (``86.6 MiB``, ``22.7 M``), exact when piped or with
    --exact."""

    def __init__(self, exact: bool) -> None:
        self.exact = exact

    def bytes(self, number: int) -> str:
        return f"{number:,}" if self.exact else human_bytes(number)

    def count(self, number: int) -> str:
        return f"{number:,}" if self.exact else human_count(number)

    def total(self, number: int, noun: str) -> str:
        if self.exact:
            return count(number, noun)
        shown = human_bytes(number) if noun == "byte" else human_count(number)
        return shown if noun == "byte" else f"{shown} {noun}s"


def _sizes_of(args: argparse.Namespace, out: Output) -> _Sizes:
    return _Sizes(args.exact or not out.tty)


def _totals_table(out: Output, totals: dict[str, Any], sizes: _Sizes) -> None:
    # For people: "parameters" and "bytes" (the --json keys are numel and nbytes).
    out.line(
        f"total: {count(totals['tensors'], 'tensor')}, "
        f"{sizes.total(totals['numel'], 'parameter')}, {sizes.total(totals['nbytes'], 'byte')}"
    )
    summary = [
        (dtype, f"{row['tensors']:,}", sizes.count(row["numel"]), sizes.bytes(row["nbytes"]))
        for dtype, row in totals["by_dtype"].items()
    ]
    if len(summary) > 1:
        columns(out, ("dtype", "tensors", "parameters", "bytes"), summary, right=(1, 2, 3))
