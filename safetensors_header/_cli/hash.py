"""``hash``: a digest of every tensor's bytes, each file's, the model's fingerprint, and a
manifest that ``validate --hashes`` checks.

Layer: adapters (the command line).
"""

from __future__ import annotations

import json
from functools import partial

from .._documents import json_document
from .._errors import HeaderError
from .output import Output, Progress, shown_source, unshown
from .reading import Failure, Read, failure_from, failure_of, read_source

__all__ = ["hash_sources", "hashes_of", "load_manifests"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Final

    from .._hashes import TensorHashes

# The plain output's summary lines, after the tensors' "DIGEST  NAME" lines (as sha256sum
# writes them): "DIGEST  (WHAT)", the content digest last, naming its SOURCE.
_FILE_LINE: Final = "({algorithm} of the file {name})"
_FINGERPRINT_LINE: Final = (
    "({algorithm} fingerprint of the {count:,} tensors: names, dtypes, shapes, bytes)"
)
_CONTENT_LINE: Final = "({algorithm} of the {count:,} tensor digests of {source})"
_SHORT_DIGEST: Final = 16  # hex digits of a digest shown on a terminal (64 bits)
_SHORT_LEGEND: Final = (
    f"(digests cut to {_SHORT_DIGEST} hex digits: --full or a pipe shows them whole)"
)
# On a terminal, the fingerprint's line without what it covers (docs/integrity.md says it):
# the line fits 80 columns.
_SHORT_FINGERPRINT_LINE: Final = "({algorithm} fingerprint of the {count:,} tensors)"
_HOW_TO_WRITE: Final = (
    "write one with `safetensors-header hash --json SOURCE > manifest.json` "
    "(hash's plain output is read too, whole)"
)


def hash_sources(args: argparse.Namespace, out: Output, err: Output) -> int:
    status = 0
    for source in args.sources:
        try:
            with Progress(err, quiet=args.quiet) as progress:
                read = read_source(source, "hash", opened=True, progress=progress.shards)
                hashes = hashes_of(read, args.algorithm, files=True, progress=progress.bytes)
        except Failure as failure:
            status = 1
            failure.report(source, out, err, json=args.json)
            continue
        if args.json:
            out.json({"path": source, **hashes.manifest(), "error": None})
            continue
        # On a terminal, digests cut short so that a line fits (a sha256 is 64 digits);
        # piped, whole, as sha256sum writes them (and as validate --hashes reads them).
        short = out.tty and not args.full
        shown = partial(_shown_digest, short=short)

        algorithm, count = hashes.algorithm, len(hashes.tensors)
        # Names escaped as every row escapes them (`Output.shown`): `_plain_manifests` reads
        # them back (`unshown`).
        out.lines(f"{shown(digest)}  {out.shown(name)}" for name, digest in hashes.tensors.items())
        out.lines(
            f"{shown(digest)}  {_FILE_LINE.format(algorithm=algorithm, name=name)}"
            for name, digest in hashes.files.items()
        )
        fingerprint = _SHORT_FINGERPRINT_LINE if short else _FINGERPRINT_LINE
        out.line(
            f"{shown(hashes.fingerprint)}  " + fingerprint.format(algorithm=algorithm, count=count)
        )
        line = _CONTENT_LINE.format(algorithm=algorithm, count=count, source=shown_source(source))
        out.line(f"{shown(hashes.content)}  {line}")
        if short:
            out.line(_SHORT_LEGEND)
    return status


def _shown_digest(digest: str | None, *, short: bool) -> str:
    assert digest is not None
    return digest[:_SHORT_DIGEST] if short else digest


def hashes_of(
    read: Read,
    algorithm: str,
    progress: Callable[[int, int], object] | None = None,
    *,
    files: bool = False,
) -> TensorHashes:
    """The digests of a source's tensors (and with `files`, of its files); `Failure` says
    why there are none."""
    from .._hashes import hash_tensors

    source = read.checkpoint if read.checkpoint is not None else read.file
    if source is None:
        raise failure_from(
            ValueError("hashing reads every tensor, which standard input has not kept: pass a file")
        )
    try:
        return hash_tensors(source, algorithm=algorithm, files=files, progress=progress)
    except (HeaderError, OSError) as error:
        raise failure_of(error, read.source) from None
    except ValueError as error:  # an algorithm hashlib does not have
        raise failure_from(error) from None


def load_manifests(path: str) -> list[tuple[str | None, TensorHashes]]:
    """The manifests of a file `hash` wrote (with --json: one JSON object, or one a line;
    without: its lines, whole), each with the path it was made from (``None`` if it says
    none). ValueError or OSError, and nothing else, if the file is not one."""
    from .._hashes import TensorHashes

    with open(path, encoding="utf-8") as file:
        text = file.read()
    documents = _json_manifests(text) if text.lstrip().startswith("{") else _plain_manifests(text)
    manifests = []
    for document in documents:
        where = document.get("path") if isinstance(document, dict) else None
        hashes = TensorHashes.from_manifest(document)
        manifests.append((where if isinstance(where, str) else None, hashes))
    if not manifests:
        raise ValueError(f"it holds no manifest; {_HOW_TO_WRITE}")
    return manifests


def _json_manifests(text: str) -> list[object]:
    """The documents of `hash --json`'s output: one JSON object, or one a line."""
    try:
        try:
            return [json_document(text)]
        except json.JSONDecodeError:
            return [json_document(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as error:
        raise ValueError(f"{error}; {_HOW_TO_WRITE}") from None
    except ValueError:  # nested deeper than json reads without recursing too deep
        raise ValueError("its JSON is nested too deeply to be a manifest") from None


def _plain_manifests(text: str) -> list[object]:
    """The manifests of `hash`'s plain output: for each SOURCE, its tensors' lines, its
    files' and its fingerprint's, then its content line (which names it)."""
    import re

    line_of = re.compile(r"([0-9A-Fa-f]+)  (.+)")
    content_of = re.compile(r"\((\S+) of the ([\d,]+) tensor digests of (.*)\)")
    file_of = re.compile(r"\((\S+) of the file (.*)\)")
    fingerprint_of = re.compile(r"\((\S+) fingerprint of the ([\d,]+) tensors: .*\)")
    documents: list[object] = []
    tensors: dict[str, str] = {}
    files: dict[str, str] = {}
    fingerprint: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line_of.fullmatch(line)
        if parts is None:
            raise ValueError(
                f"line {number} is not a line of hash's output (DIGEST, two spaces, a name); "
                + _HOW_TO_WRITE
            )
        digest, rest = parts.groups()
        content = content_of.fullmatch(rest)
        if content is not None:
            algorithm, count, source = content.groups()
            if int(count.replace(",", "")) != len(tensors):
                raise ValueError(
                    f"line {number} counts {count} tensor digests, but {len(tensors):,} lines "
                    "come before it"
                )
            document: dict[str, object] = {"path": source, "algorithm": algorithm}
            document.update(content=digest, tensors=tensors, files=files)
            if fingerprint is not None:
                document["fingerprint"] = fingerprint
            documents.append(document)
            tensors, files, fingerprint = {}, {}, None
        elif (found := file_of.fullmatch(rest)) is not None:
            files[found[2]] = digest
        elif fingerprint_of.fullmatch(rest) is not None:
            fingerprint = digest
        else:
            tensors[unshown(rest)] = digest
    if tensors or files or fingerprint is not None:
        raise ValueError(
            "it ends before the line that closes hash's output of a SOURCE "
            "(DIGEST  (ALGORITHM of the N tensor digests of SOURCE)); " + _HOW_TO_WRITE
        )
    return documents
