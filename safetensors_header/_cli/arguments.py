"""The command line's arguments, help texts and the help formatter.

Layer: adapters (the command line).
"""

from __future__ import annotations

from .. import __version__
from .inspect import SORT_KEYS
from .output import PROG

__all__ = ["argument_parser", "parsed_quickly"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any, Final


_SOURCE_HELP: Final = (
    "a .safetensors file, a checkpoint (a directory, or its index .json), an http(s):// URL "
    "of either, a model on the Hugging Face Hub (hf://ORG/MODEL[@REVISION][/FILE], or "
    "ORG/MODEL when no such local path exists), or - for standard input"
)
_WIDE_HELP: Final = "names whole on a terminal too, however wide"


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
  {PROG} inspect model.safetensors
  {PROG} inspect --tree ORG/MODEL        # a model on the Hub
  {PROG} validate --strict *.safetensors
  {PROG} diff base-model/ fine-tuned-model/

A SOURCE is a .safetensors file, a checkpoint (a directory, or its index .json), an
http(s):// URL of either, a model on the Hugging Face Hub (hf://ORG/MODEL[@REVISION][/FILE],
or ORG/MODEL when no such local path exists; HF_TOKEN is sent to the Hub only), or - for
standard input. Only headers are read, never the tensors' data. --json prints JSON Lines:
one object per SOURCE (for diff, one object).

{_EXIT_STATUS}"""


_INSPECT_EPILOG: Final = f"""\
examples:
  {PROG} inspect model.safetensors
  {PROG} inspect --sort size --filter '*.weight' ./checkpoint-dir
  {PROG} inspect --tree hf://ORG/MODEL@main
  {PROG} inspect https://example.com/m/model.safetensors.index.json
  {PROG} inspect --json model.safetensors | jq '.totals.by_dtype'
  curl -s URL | {PROG} inspect -

On a terminal the names get the room: sizes read 86.6 MiB (--exact for bytes), the byte
ranges are left out (--offsets to show them), and a name too long for the width is cut in
the middle, never so that two tensors look alike (--wide: never cut). Piped, nothing is
cut or rounded. Byte ranges are absolute offsets in the file: start-end, end exclusive.

{_INSPECT_STATUS}"""


_VALIDATE_EPILOG: Final = f"""\
examples:
  {PROG} validate model.safetensors
  {PROG} validate --strict ./checkpoint-dir *.safetensors
  {PROG} validate --json *.safetensors | jq 'select(.valid | not)'
  {PROG} validate --against-hub org/name
  {PROG} validate --against-hub models--org--name/snapshots/*
  {PROG} validate --against-hub ./copy --repo org/name@main

One line per SOURCE (PATH: ok, or PATH: KIND: message), then one per warning or --strict
finding, each starting with PATH. Warnings (an index whose total_size is wrong, a tensor
the index does not list) leave the exit status alone unless --strict is given. With
--against-hub, one line per file whose sha256 is not the one the Hub publishes
(PATH: hub: FILE: ...).

{_VALIDATE_STATUS}"""


_HASH_EPILOG: Final = f"""\
examples:
  {PROG} hash model.safetensors
  {PROG} hash --json ./checkpoint-dir > manifest.json
  {PROG} validate --hashes manifest.json ./checkpoint-dir

Each line: the digest of a tensor's bytes, two spaces, its name (as sha256sum writes); the
last line, the digest of those digests in file order. On a terminal the digests are cut to
their first 16 hex digits, so that a line fits; --full, or a pipe, gives them whole. The
tensors are read through the data path, a few MiB at a time on every core.

exit status: 0 when every SOURCE was hashed, 1 when any was not, 2 for a usage error."""


_DIFF_EPILOG: Final = f"""\
examples:
  {PROG} diff model.safetensors model-fp16.safetensors
  {PROG} diff --values ./base-model ./fine-tuned-model
  {PROG} diff --stats ./base-model hf://ORG/MODEL
  {PROG} diff --json A B | jq '.changed[].name'

By default diff compares the headers alone: tensors added, removed and changed (dtype,
shape, size), the files' __metadata__ keys added, removed and changed, and the totals per
dtype of A and B. Two files whose tensors have the same names, dtypes and shapes are the
same to it, whatever their values: --values also compares each tensor's bytes (a sha256 of
each tensor on each side), and --stats says by how much the changed ones differ. Where a
tensor is stored (its shard, its offset) is not a difference.

exit status: 0 when A and B describe the same tensors (names, dtypes and shapes; metadata may
differ) and, with --values or --stats, hold the same values; 1 when they do not; 2 when
either cannot be read or for a usage error."""


def argument_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of the command line; with `command` (the first argument), only that
    command's arguments are built when it is one (a start pays for every parser made), all
    of them otherwise."""
    import argparse

    from .formatter import HelpFormatter

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Read the headers of safetensors files without loading them.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    # prog= given: argparse would otherwise build a help formatter now.
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", prog=PROG)
    for name in [command] if command in _COMMANDS else _COMMANDS:
        summary, description, epilog, arguments = _COMMANDS[name]
        sub = commands.add_parser(
            name,
            help=summary,
            description=description,
            epilog=epilog,
            formatter_class=HelpFormatter,
        )
        _common_arguments(sub, name)
        arguments(sub)
    return parser


def _common_arguments(command: argparse.ArgumentParser | _Defaults, name: str) -> None:
    if name != "diff":
        command.add_argument("sources", nargs="+", metavar="SOURCE", help=_SOURCE_HELP)
    command.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (shown only on a terminal, for work of over a second)",
    )


def parsed_quickly(argv: Sequence[str]) -> argparse.Namespace | None:
    """`argv` as the parser would parse it, without making the parser, where it is the
    commonest command line: ``inspect`` and sources alone (no option: a word that starts
    with ``-`` but ``-`` itself); None for any other, which the parser parses. A first
    command's start then pays for no argparse (nor the gettext and locale it imports)."""
    if len(argv) < 2 or argv[0] != "inspect":
        return None
    if any(word.startswith("-") and word != "-" for word in argv[1:]):
        return None
    from types import SimpleNamespace

    defaults = _Defaults()
    _common_arguments(defaults, "inspect")
    _inspect_arguments(defaults)
    values = {**defaults.values, "command": "inspect", "sources": list(argv[1:])}
    return SimpleNamespace(**values)  # type: ignore[return-value]


class _Defaults:
    """What a command's arguments declare, recorded as their defaults (each option's
    destination and default as argparse would give them), for `parsed_quickly`."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def add_argument(self, *flags: str, **options: Any) -> None:
        # argparse's: a positional's name; an option's first long flag (else its first).
        named = [flag for flag in flags if flag.startswith("--")] or list(flags)
        dest = options.get("dest") or named[0].lstrip("-").replace("-", "_")
        store_true = options.get("action") == "store_true"
        self.values[dest] = options.get("default", False if store_true else None)


def _inspect_arguments(inspect: argparse.ArgumentParser | _Defaults) -> None:
    inspect.add_argument("--json", action="store_true", help="one JSON object per SOURCE")
    inspect.add_argument(
        "--sort", choices=sorted(SORT_KEYS), default="offset", help="tensor order (offset)"
    )
    inspect.add_argument(
        "--filter", metavar="GLOB", help="only tensors whose name matches, e.g. '*.bias'"
    )
    for flag, text in (
        ("--tree", "the tensors by module, repeated blocks (layers.{0..31}) shown once"),
        ("--wide", _WIDE_HELP),
        ("--offsets", "each tensor's byte range in its file on a terminal too (always when piped)"),
        ("--exact", "exact byte and parameter counts on a terminal too (86.6 MiB otherwise)"),
    ):
        inspect.add_argument(flag, action="store_true", help=text)
    inspect.add_argument(
        "--context",
        type=_positive,
        metavar="TOKENS",
        help="--tree's memory estimate for sequences of this many tokens (the config's most)",
    )
    inspect.add_argument(
        "--world",
        type=_positive,
        metavar="N",
        help="what one of N tensor-parallel ranks holds of each tensor, and by which rule",
    )
    inspect.add_argument(
        "--rank",
        type=_at_least_zero,
        default=0,
        metavar="R",
        help="--world's rank (0): 0 to N-1",
    )
    inspect.add_argument(
        "--batch",
        type=_positive,
        default=1,
        metavar="N",
        help="--tree's memory estimate for N sequences at once (1)",
    )


def _whole_number(smallest: int) -> Callable[[str], int]:
    """An argument's type: a whole number, `smallest` or more (argparse's error otherwise)."""

    def whole_number(text: str) -> int:
        import argparse

        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if value < smallest:
            raise argparse.ArgumentTypeError(f"expected {smallest} or more, not {value}")
        return value

    return whole_number


_positive: Final = _whole_number(1)
_at_least_zero: Final = _whole_number(0)


def _validate_arguments(validate: argparse.ArgumentParser) -> None:
    validate.add_argument(
        "--strict",
        action="store_true",
        help="add the strict audit, and fail checkpoints with warnings",
    )
    validate.add_argument("--json", action="store_true", help="one JSON object per SOURCE")
    validate.add_argument(
        "--hashes",
        metavar="MANIFEST",
        help="also check every tensor's bytes against a manifest of hash --json",
    )
    validate.add_argument(
        "--against-hub",
        action="store_true",
        help="also compare each file's sha256 with the one the Hugging Face Hub publishes "
        "(hf:// sources, copies in the Hub's cache, others with --repo)",
    )
    validate.add_argument(
        "--repo",
        metavar="ORG/NAME[@REVISION]",
        help="with --against-hub: the Hub repository a local SOURCE is a copy of",
    )


def _hash_arguments(hashing: argparse.ArgumentParser) -> None:
    hashing.add_argument(
        "--algorithm", default="sha256", help="a hashlib algorithm (sha256, blake2b, ...)"
    )
    hashing.add_argument(
        "--json", action="store_true", help="one manifest per SOURCE (for validate --hashes)"
    )
    hashing.add_argument(
        "--full",
        action="store_true",
        help="whole digests on a terminal too (cut to 16 hex digits there; piped, always whole)",
    )


def _diff_arguments(diff: argparse.ArgumentParser) -> None:
    diff.add_argument("a", metavar="A", help=_SOURCE_HELP)
    diff.add_argument("b", metavar="B", help="the same, compared with A")
    diff.add_argument("--json", action="store_true", help="one JSON object")
    diff.add_argument("--wide", action="store_true", help=_WIDE_HELP)
    diff.add_argument(
        "--values",
        action="store_true",
        help="also compare the tensors' values: a sha256 of each tensor's bytes on each side "
        "(reads every tensor; the default reads the headers alone)",
    )
    diff.add_argument(
        "--stats",
        action="store_true",
        help="--values, and for each tensor whose values changed: how many elements differ, "
        "the largest absolute and relative difference (reads those tensors again, a chunk at "
        "a time; needs numpy)",
    )


# Each command: its one-line summary (in the list of commands), description, epilog, and
# what adds its own arguments to its parser.
_COMMANDS: Final = {
    "inspect": (
        "show the tensors, metadata and totals of each source",
        "Show each source's header facts, metadata, tensors and totals.",
        _INSPECT_EPILOG,
        _inspect_arguments,
    ),
    "validate": (
        "check each source; one line per source",
        "Check each source as the reference implementation would; with --strict, also report "
        "what it accepts but a careful reader should not.",
        _VALIDATE_EPILOG,
        _validate_arguments,
    ),
    "hash": (
        "a digest of every tensor's bytes, and a manifest of them",
        "Hash every tensor's bytes (the header left out, so that a metadata change keeps the "
        "digests), and one digest over them all.",
        _HASH_EPILOG,
        _hash_arguments,
    ),
    "diff": (
        "compare the tensors and metadata of two sources",
        "Compare two files, checkpoints or URLs by their headers alone.",
        _DIFF_EPILOG,
        _diff_arguments,
    ),
}
