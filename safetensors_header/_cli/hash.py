"""``hash``: a digest of every tensor's bytes, and a manifest that ``validate --hashes`` checks.

Layer: adapters (the command line).
"""

from __future__ import annotations

import json

from .._errors import HeaderError
from .output import Output, Progress, shown_source
from .reading import Failure, Read, failure_from, failure_of, read_source

__all__ = ["hash_sources", "hashes_of", "load_manifests"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from .._hashes import TensorHashes


def hash_sources(args: argparse.Namespace, out: Output, err: Output) -> int:
    status = 0
    for source in args.sources:
        try:
            with Progress(err, quiet=args.quiet) as progress:
                read = read_source(source, "hash", opened=True, progress=progress.shards)
                hashes = hashes_of(read, args.algorithm, progress=progress.bytes)
        except Failure as failure:
            status = 1
            failure.report(source, out, err, json=args.json)
            continue
        if args.json:
            out.json({"path": source, **hashes.manifest(), "error": None})
            continue
        # As sha256sum writes them: the digest, two spaces, the name.
        out.lines(f"{digest}  {out.shown(name)}" for name, digest in hashes.tensors.items())
        count = len(hashes.tensors)
        out.line(
            f"{hashes.content}  ({hashes.algorithm} of the {count:,} tensor digests of "
            f"{shown_source(source)})"
        )
    return status


def hashes_of(
    read: Read, algorithm: str, *, progress: Callable[[int, int], object] | None = None
) -> TensorHashes:
    """The digests of a source's tensors; `Failure` says why there are none."""
    from .._hashes import hash_tensors

    source = read.checkpoint if read.checkpoint is not None else read.file
    if source is None:
        raise failure_from(
            ValueError("hashing reads every tensor, which standard input has not kept: pass a file")
        )
    try:
        return hash_tensors(source, algorithm=algorithm, progress=progress)
    except (HeaderError, OSError) as error:
        raise failure_of(error, read.source) from None
    except ValueError as error:  # an algorithm hashlib does not have
        raise failure_from(error) from None


def load_manifests(path: str) -> list[tuple[str | None, TensorHashes]]:
    """The manifests of a file `hash --json` wrote (one JSON object, or one a line), each
    with the path it was made from (``None`` if it says none). ValueError or OSError if the
    file is not one."""
    from .._hashes import TensorHashes

    with open(path, encoding="utf-8") as file:
        text = file.read()
    try:
        documents = [json.loads(text)]
    except json.JSONDecodeError:
        documents = [json.loads(line) for line in text.splitlines() if line.strip()]
    manifests = []
    for document in documents:
        where = document.get("path") if isinstance(document, dict) else None
        hashes = TensorHashes.from_manifest(document)
        manifests.append((where if isinstance(where, str) else None, hashes))
    if not manifests:
        raise ValueError("it holds no manifest")
    return manifests
