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

import sys

from .arguments import argument_parser, parsed_quickly
from .output import PROG, STDIN, Output
from .reading import hub_source

__all__ = ["main"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default: ``sys.argv[1:]``); return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parsed_quickly(argv)
    if args is None:
        parser = argument_parser(argv[0] if argv else None)
        args = parser.parse_args(argv)
    sources = [args.a, args.b] if args.command == "diff" else args.sources
    if sources.count(STDIN) > 1:
        argument_parser(args.command).error("- (standard input) can be read only once")
    out, err = Output(sys.stdout), Output(sys.stderr)
    out.wide = getattr(args, "wide", False)
    if args.command == "diff":
        args.a, args.b = (hub_source(source, err) for source in sources)
    else:
        args.sources = [hub_source(source, err) for source in sources]
    try:
        # Each command's module loads when it runs: a start pays for one.
        if args.command == "inspect":
            from .inspect import inspect_sources as command
        elif args.command == "validate":
            from .validate import validate_sources as command
        elif args.command == "hash":
            from .hash import hash_sources as command
        else:
            from .diff import diff_sources as command
        status = command(args, out, err)
    except KeyboardInterrupt:
        err.line(f"{PROG}: interrupted")
        status = 130  # 128 + SIGINT, as a shell reports it
    out.flush()
    err.flush()
    return status
