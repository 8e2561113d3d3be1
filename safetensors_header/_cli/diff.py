"""``diff``: what tells two sources apart, by their headers alone.

Layer: adapters (the command line).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from .._core.header import TensorInfo, shown_shape
from .columns import columns
from .documents import totals
from .output import PROG, Output, Progress, count, cut, human_bytes, natural_key, shown_source
from .reading import Failure, Read, read_source
from .values import ALGORITHM, SideFailure, ValueChange, changed_values, statistics_need

__all__ = ["diff_sources"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Final


_SHOWN_DIFF_VALUE: Final = 60  # the same, in a diff's table of metadata


def diff_sources(args: argparse.Namespace, out: Output, err: Output) -> int:
    values = args.values or args.stats
    if args.stats and (need := statistics_need()) is not None:
        err.line(f"{PROG}: {need}")
        return 2
    sides = [
        _read_side(source, err, quiet=args.quiet, opened=values) for source in (args.a, args.b)
    ]
    for source, side in zip((args.a, args.b), sides, strict=True):
        if isinstance(side, Failure):
            _fail(args, out, source, side)
            return 2
    a, b = sides
    assert isinstance(a, Read)
    assert isinstance(b, Read)
    difference = _Difference(a, b)
    if values:
        try:
            with Progress(err, quiet=args.quiet) as progress:
                difference.compare_values(statistics=args.stats, progress=progress.bytes)
        except SideFailure as failed:
            err.line(f"{PROG}: {shown_source(failed.source)}: {failed.failure.diagnosis()}")
            _fail(args, out, failed.source, failed.failure)
            return 2
    if args.json:
        out.json(difference.document())
    else:
        difference.write(out)
    return 0 if difference.same else 1


def _fail(args: argparse.Namespace, out: Output, source: str, failure: Failure) -> None:
    """With --json, the one object: which side could not be read, and why."""
    if args.json:
        error = {"path": source, **failure.document()}
        out.json({"a": args.a, "b": args.b, "same_tensors": None, "error": error})


def _read_side(source: str, err: Output, *, quiet: bool, opened: bool) -> Read | Failure:
    """One side of a diff, or why it cannot be read (said on stderr)."""
    try:
        with Progress(err, quiet=quiet) as progress:
            return read_source(source, "diff", opened=opened, progress=progress.shards)
    except Failure as failure:
        err.line(f"{PROG}: {shown_source(source)}: {failure.diagnosis()}")
        return failure


def _merged_metadata(read: Read) -> dict[str, str]:
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

    def __init__(self, a: Read, b: Read) -> None:
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
        self.totals_a, self.totals_b = totals(tensors_a.values()), totals(tensors_b.values())
        # With --values: the tensors of the same name, dtype and shape whose bytes differ.
        self.values: list[ValueChange] | None = None
        self.statistics = False

    @property
    def same_tensors(self) -> bool:
        return not (self.removed or self.added or self.changed)

    @property
    def same(self) -> bool:
        """The exit status's question: the same tensors, and (with --values) the same bytes."""
        return self.same_tensors and not self.values

    @property
    def compared(self) -> list[str]:
        """The tensors whose values are compared: in both, with the same dtype and shape."""
        changed = {before.name for before, _, _ in self.changed}
        return [name for name in self.b.tensors if name in self.a.tensors and name not in changed]

    def compare_values(
        self, *, statistics: bool, progress: Callable[[int, int], object] | None
    ) -> None:
        """Hash both sides' tensors (and with `statistics`, compare the values of those that
        differ); `SideFailure` says which side cannot be read."""
        self.values = changed_values(
            self.a, self.b, self.compared, statistics=statistics, progress=progress
        )
        self.statistics = statistics

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
            "same_values": None if self.values is None else not self.values,
            "values": None
            if self.values is None
            else {
                "algorithm": ALGORITHM,
                "compared": len(self.compared),
                "changed": [change.document() for change in self.values],
            },
            "error": None,
        }

    def write(self, out: Output) -> None:
        for label, read in (("a", self.a), ("b", self.b)):
            out.line(
                f"{label}: {shown_source(read.source)} ({count(len(read.headers), 'file')}, "
                f"{count(len(read.tensors), 'tensor')})"
            )
        if self.values is None:
            # The default, said where it is read: a header diff is blind to the values.
            what = "(names, dtypes and shapes; values not compared: --values)"
        else:
            what = "(names, dtypes and shapes)"
        if self.same_tensors:
            out.line(f"tensors: the same {len(self.a.tensors):,} {what}")
        else:
            out.line(
                f"tensors: {len(self.changed):,} changed, {len(self.added):,} added, "
                f"{len(self.removed):,} removed"
            )
        if self.values is not None:
            compared = len(self.compared)
            if self.values:
                said = f"{len(self.values):,} of {compared:,} tensors changed"
            else:
                said = f"the same in all {compared:,} tensors compared"
            out.line(f"values: {said} ({ALGORITHM} of each tensor's bytes)")
        metadata = (self.meta_changed, self.meta_added, self.meta_removed)
        if any(metadata):
            out.line(
                f"metadata: {len(self.meta_changed):,} changed, {len(self.meta_added):,} added, "
                f"{len(self.meta_removed):,} removed"
            )
        else:
            out.line("metadata: the same")
        self._write_tensors(out)
        if self.values:
            out.line()
            self._write_values(out, self.values)
        if any(metadata):
            out.line()
            self._write_metadata(out)
        out.line()
        self._write_totals(out)

    def _write_tensors(self, out: Output) -> None:
        if self.same_tensors:
            return

        def both(before: str, after: str) -> str:
            return before if before == after else f"{before} -> {after}"

        # On a terminal the names get the room: sizes for people (exact when piped).
        size = human_bytes if out.tty and not out.wide else "{:,}".format
        ordered = [(before.name, "~", before, after) for before, after, _ in self.changed]
        ordered += [(t.name, "-", t, t) for t in self.removed]
        ordered += [(t.name, "+", t, t) for t in self.added]
        # By name, numbers in number order (layer 2 before 10): a tensor's changes side by
        # side (a weight made I8 and the scale added beside it).
        ordered.sort(key=lambda entry: natural_key(entry[0]))
        rows = [
            (
                sign,
                out.shown(name),
                both(before.dtype, after.dtype),
                both(shown_shape(before.shape), shown_shape(after.shape)),
                both(size(before.nbytes), size(after.nbytes)),
            )
            for name, sign, before, after in ordered
        ]
        out.line()
        columns(
            out,
            ("", "name", "dtype", "shape", "bytes"),
            rows,
            right=(4,),
            shrink=(1,),
            styles=[_STYLE[row[0]] for row in rows],
        )

    def _write_values(self, out: Output, changes: list[ValueChange]) -> None:
        """The tensors whose values changed: with --stats, by how much; else their digests."""
        ordered = sorted(changes, key=lambda change: natural_key(change.name))
        styles: list[str | None] = ["changed"] * len(ordered)
        if not self.statistics:
            digests = [
                ("~", out.shown(c.name), f"{c.a[:_SHOWN_DIGEST]} -> {c.b[:_SHOWN_DIGEST]}")
                for c in ordered
            ]
            heads: tuple[str, ...] = ("", "values changed", f"{ALGORITHM} a -> b")
            columns(out, heads, digests, shrink=(1,), styles=styles)
            return
        rows: list[tuple[str, ...]] = []
        for change in ordered:
            found = change.statistics
            if found is None:
                rows.append(("~", out.shown(change.name), "", "", "", change.why_none or ""))
                continue
            differing = f"{found['differing']:,} of {found['elements']:,}"
            rows.append(
                (
                    "~",
                    out.shown(change.name),
                    differing,
                    _shown_number(found["max_abs_diff"]),
                    _shown_number(found["max_rel_diff"]),
                    f"{found['nonfinite']:,} NaN or inf" if found["nonfinite"] else "",
                )
            )
        heads = ("", "values changed", "elements differing", "max abs diff", "max rel diff", "")
        columns(out, heads, rows, right=(2, 3, 4), shrink=(1,), styles=styles)

    def _write_metadata(self, out: Output) -> None:
        def shown(value: str | None) -> str:
            return "-" if value is None else cut(out.shown(value), _SHOWN_DIFF_VALUE)

        rows = [
            ("~", out.shown(key), shown(before), shown(after))
            for key, (before, after) in self.meta_changed.items()
        ]
        rows += [
            ("-", out.shown(key), shown(value), "-") for key, value in self.meta_removed.items()
        ]
        rows += [("+", out.shown(key), "-", shown(value)) for key, value in self.meta_added.items()]
        columns(
            out,
            ("", "metadata key", "a", "b"),
            rows,
            shrink=(1, 2, 3),
            styles=[_STYLE[row[0]] for row in rows],
        )

    def _write_totals(self, out: Output) -> None:
        # A row a side, or one row "in a and b" where both have the same: every number says
        # whose it is.
        per_a, per_b = self.totals_a["by_dtype"], self.totals_b["by_dtype"]
        nothing = {"tensors": 0, "numel": 0, "nbytes": 0}
        rows: list[tuple[str, ...]] = []
        styles: list[str | None] = []
        sides = [
            (dtype, per_a.get(dtype, nothing), per_b.get(dtype, nothing))
            for dtype in sorted({*per_a, *per_b})
        ]
        for dtype, a, b in [*sides, ("all", self.totals_a, self.totals_b)]:
            if all(a[key] == b[key] for key in ("tensors", "numel", "nbytes")):
                rows.append(_totals_row(dtype, "a and b", a))
                styles.append(None)
            else:
                rows += [_totals_row(dtype, "a", a), _totals_row(dtype, "b", b)]
                styles += ["removed", "added"]
        columns(
            out,
            ("dtype", "in", "tensors", "parameters", "bytes"),
            rows,
            right=(2, 3, 4),
            shrink=(),
            styles=styles,
        )


_STYLE: Final = {"~": "changed", "-": "removed", "+": "added"}
_SHOWN_DIGEST: Final = 12  # hex digits of a digest in the text (--json has them whole)


def _shown_number(value: float | None) -> str:
    """A difference for people: 4 significant digits; ``-`` for none (non-finite values)."""
    return "-" if value is None else f"{value:.4g}"


def _totals_row(dtype: str, side: str, totals: Mapping[str, int]) -> tuple[str, ...]:
    return (
        dtype,
        side,
        f"{totals['tensors']:,}",
        f"{totals['numel']:,}",
        f"{totals['nbytes']:,}",
    )
