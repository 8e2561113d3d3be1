"""``inspect --world N [--rank R]``: what one rank of a tensor-parallel job holds of each
tensor, and why, before the job starts (`plan_rank`: the rules for the model's architecture,
its config.json read beside it).

Layer: adapters (the command line).
"""

from __future__ import annotations

import warnings

from .._core.header import shown_shape
from .columns import columns
from .output import PROG, count, shown_source
from .reading import Read, failure_of

__all__ = ["shares_view"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import argparse

    from .output import Output


def shares_view(args: argparse.Namespace, read: Read, out: Output, err: Output) -> bool:
    """Print rank ``args.rank`` of ``args.world``'s share of `read`'s tensors (``--filter``
    applies); False (and why, on stderr) when it cannot be planned."""
    from .._errors import HeaderError
    from .._ranks import plan_rank

    source = read.checkpoint if read.checkpoint is not None else read.file
    if source is None:  # standard input: no file to plan reads of, none beside it
        err.line(f"{PROG}: {shown_source(read.source)}: --world needs a file, not a stream")
        return False
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            plan = plan_rank(source, args.rank, args.world)
        except (HeaderError, OSError) as error:
            failure_of(error, read.source).report(read.source, out, err, json=args.json)
            return False
    tensors = list(plan.tensors)
    if args.filter is not None:
        import fnmatch

        tensors = [t for t in tensors if fnmatch.fnmatchcase(t.name, args.filter)]
    if args.json:
        out.json(
            {
                "path": read.source,
                "rank": args.rank,
                "world": args.world,
                "bytes": plan.bytes_asked,
                "bytes_read": plan.bytes_read,
                "requests": len(plan.requests),
                "tensors": [
                    {
                        "name": t.name,
                        "file": t.file,
                        "dtype": t.dtype,
                        "shape": list(t.shape),
                        "axis": t.axis,
                        "rule": t.rule,
                    }
                    for t in tensors
                ],
            }
        )
    else:
        out.heading(
            shown_source(read.source),
            f"rank {args.rank} of {args.world}: {plan.bytes_asked:,} bytes in "
            f"{count(len(plan.tensors), 'tensor')}, {plan.bytes_read:,} read in "
            f"{count(len(plan.requests), 'request')}",
        )
        rows = [
            (
                out.shown(t.name),
                shown_shape(t.shape),
                "whole" if t.axis is None else f"axis {t.axis}",
                out.shown(t.rule or ""),
            )
            for t in tensors
        ]
        columns(out, ("name", "rank's shape", "split", "rule"), rows)
        shared = (line for line in plan.summary().splitlines() if line.startswith("a rank's"))
        out.line(next(shared, ""))
    for warning in said:
        err.line(f"{PROG}: {shown_source(read.source)}: {warning.message}")
    return True
