"""``validate``: one verdict per source, with --strict the audit's findings.

Layer: adapters (the command line).
"""

from __future__ import annotations

import argparse

from .._core.diagnose import DIAGNOSIS
from .._errors import HeaderError
from .documents import finding_document
from .hash import hashes_of, load_manifests
from .output import PROG, Output, Progress, count, listed, shown_source
from .reading import Failure, Read, failure_from, failure_of, header_bytes, read_source

__all__ = ["validate_sources"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from .._audit import Finding
    from .._hashes import TensorHashes
    from .._verify import FileCheck


class _Verdict:
    """What validate found out about one source."""

    def __init__(self, source: str, *, strict: bool) -> None:
        self.source = source
        self.strict = strict
        self.tensors: int | None = None
        self.failure: Failure | None = None
        self.findings: list[Finding] = []  # of the strict audit
        self.problems: list[Finding] = []  # of a checkpoint: warnings, failures when strict
        self.other_files: list[str] = []
        self.hashes: dict[str, str] | None = None  # with --hashes: tensor -> how it differs
        self.hub: list[FileCheck] | None = None  # with --against-hub: every file's

    @property
    def valid(self) -> bool:
        if self.failure is not None or self.findings or self.hashes:
            return False
        if self.hub is not None and not all(check.matches for check in self.hub):
            return False
        return not (self.strict and self.problems)

    def document(self) -> dict[str, object]:
        return {
            "path": self.source,
            "valid": self.valid,
            "tensors": self.tensors,
            "error": None if self.failure is None else self.failure.document(),
            "findings": [finding_document(finding) for finding in self.findings],
            "problems": [finding_document(problem) for problem in self.problems],
            "other_files": self.other_files,
            "hashes": self.hashes,
            "hub": None
            if self.hub is None
            else [
                {
                    "file": check.name,
                    "sha256": check.sha256,
                    "published": check.published,
                    "matches": check.matches,
                }
                for check in self.hub
            ],
        }

    def lines(self) -> list[str]:
        where = shown_source(self.source)
        hub = [check for check in self.hub or () if not check.matches]
        against = [f"{where}: hub: {check.name}: {check.verdict}" for check in hub]
        if self.failure is not None:
            return [f"{where}: {_verdict(self.failure)}", *against]
        strict = [*self.findings, *self.problems] if self.strict else self.findings
        warnings = [] if self.strict else self.problems
        if strict:
            first = f"{where}: strict: {count(len(strict), 'finding')}"
        elif self.hashes:
            first = f"{where}: hashes: {count(len(self.hashes), 'tensor')} not as the manifest says"
        elif hub:
            first = f"{where}: hub: {count(len(hub), 'file')} not the Hub's"
        else:
            first = f"{where}: ok ({count(self.tensors or 0, 'tensor')})"
            if self.hub:
                first += f", {count(len(self.hub), 'file')} as the Hub publishes"
            if warnings:
                first += f", {count(len(warnings), 'warning')}"
        return [
            first,
            *(f"{where}: strict: {finding.kind}: {finding.message}" for finding in strict),
            *(f"{where}: warning: {problem.kind}: {problem.message}" for problem in warnings),
            *(f"{where}: hashes: {name}: {how}" for name, how in (self.hashes or {}).items()),
            *against,
            *(
                [f"{where}: note: also in the directory, not read: {listed(self.other_files)}"]
                if self.other_files
                else []
            ),
        ]


def _verdict(failure: Failure) -> str:
    """``KIND: ...``, which scripts read by its kind; then, for a file that is something else
    (an HTML page, an LFS pointer...), what it is and what to do, and the numbers last (as
    `inspect` says it); otherwise the message, then the hint."""
    if failure.hint is not None and failure.hint.startswith(DIAGNOSIS):
        return f"{failure.kind}: {failure.hint} ({failure.message})"
    return failure.text()


def validate_sources(args: argparse.Namespace, out: Output, err: Output) -> int:
    manifests: list[tuple[str | None, TensorHashes]] = []
    if args.repo is not None and not args.against_hub:
        err.line(f"{PROG}: --repo {args.repo}: says what --against-hub compares with; add it")
        return 2
    if args.hashes is not None:
        try:
            manifests = load_manifests(args.hashes)
        except (OSError, ValueError) as error:
            err.line(f"{PROG}: --hashes {args.hashes}: not a manifest of hash: {error}")
            return 2
    status = 0
    for source in args.sources:
        verdict = _Verdict(source, strict=args.strict)
        try:
            with Progress(err, quiet=args.quiet) as progress:
                read = read_source(source, "validate", opened=True, progress=progress.shards)
                _check(verdict, read)
                if manifests:
                    expected = _manifest_for(source, manifests, args.hashes)
                    found = hashes_of(read, expected.algorithm, progress=progress.bytes)
                    verdict.hashes = expected.differences(found)
        except Failure as failure:
            verdict.failure = failure
        if args.against_hub:
            # Even for a file that could not be read: which file differs is the answer.
            try:
                verdict.hub = _against_hub(source, args.repo)
            except Failure as failure:
                verdict.failure = verdict.failure or failure
        if not verdict.valid:
            status = 1
        if args.json:
            out.json(verdict.document())
        else:
            for line in verdict.lines():
                out.line(line)
    return status


def _against_hub(source: str, repo: str | None) -> list[FileCheck]:
    """Every file of SOURCE compared with the Hub's sha256 (`verify_files`)."""
    from .._verify import verify_files

    name, _, revision = (repo or "").partition("@")
    try:
        return list(verify_files(source, repo=name or None, revision=revision or None))
    except (HeaderError, OSError) as error:
        raise failure_of(error, source) from None
    except ValueError as error:
        raise failure_from(error) from None


def _manifest_for(
    source: str, manifests: list[tuple[str | None, TensorHashes]], path: str
) -> TensorHashes:
    """The manifest of a SOURCE: the only one, or the one made from the same path."""
    if len(manifests) == 1:
        return manifests[0][1]
    for where, hashes in manifests:
        if where == source:
            return hashes
    raise failure_from(KeyError(f"{path} has no manifest made from {source}"))


def _check(verdict: _Verdict, read: Read) -> None:
    verdict.tensors = len(read.tensors)
    verdict.other_files = read.other_files
    if read.checkpoint is not None:
        verdict.problems = list(read.checkpoint.problems)
    if not verdict.strict:
        return
    from .._audit import Finding, audit_header  # only --strict needs it

    for name, header in read.headers.items():
        prefix = header_bytes(read, name, header)
        try:
            found = audit_header(prefix, file_size=header.file_size)
        except HeaderError as error:  # the file changed since it was read
            raise failure_of(error, read.source) from None
        if read.checkpoint is not None:  # say which shard
            found = [Finding(f.kind, f"{name}: {f.message}", f.tensor) for f in found]
        verdict.findings += found
