"""Files checked against the Hugging Face Hub: each file's sha256, whole (header included),
compared with the one the Hub publishes for it.

Layer: services (on `_hashes` and the source layer).

The Hub names every file it keeps in LFS or Xet storage by its sha256 (the LFS object's id):
the ``X-Linked-Etag`` of its resolve reply (`_sources.hub.linked_sha256`), what ``sha256sum``
prints for the file and what ``hf cache verify`` compares. `verify_files` hashes each file
(`hash_tensors` with ``files=True``; a file whose header cannot be read, with hashlib alone)
and asks the Hub for its published sha256: for an ``hf://`` source, the resolve reply its
header was read through says it; for a local copy (a folder, a file, the Hub's cache), one
request a file at the repository's resolve URL, 1 byte asked of the CDN.
"""

from __future__ import annotations

import os
import re

from ._errors import HeaderError
from ._records import record
from ._sources.hub import linked_sha256
from ._sources.identity import identity_of
from ._sources.options import Options

__all__ = ["FileCheck", "published_sha256", "verify_files"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final

    from typing_extensions import Unpack

    from ._core.header import Header
    from ._fetch import SafetensorsFile
    from ._sources.transport import Transport

# The Hub's cache: <cache>/<kind>s--<org>--<name>/snapshots/<revision>/<path in the repository>
# (huggingface_hub's layout; "--" is not allowed in a repository's name).
_CACHED: Final = re.compile(r"(models|datasets|spaces|kernels)--([^/]+?)--([^/]+)")
_KIND_PREFIX: Final = {"models": "", "datasets": "datasets/", "spaces": "spaces/"}
_KIND_PREFIX["kernels"] = "kernels/"
_LOOKUPS: Final = 8  # the Hub's published digests asked for at once


@record(module="safetensors_header.integrity")
class FileCheck:
    """One file compared with the Hugging Face Hub's (`verify_files`).

    Attributes:
        name: The file's path in the repository (``model-00001-of-00002.safetensors``,
            ``transformer/diffusion_pytorch_model.safetensors``).
        source: Where its bytes were read (a local path, an ``hf://`` path), as shown in
            messages.
        sha256: The sha256 of the whole file as read (hex), header included.
        published: The sha256 the Hub publishes for the file (its resolve reply's
            ``X-Linked-Etag``), or None where it publishes none (a file kept in git, not in
            LFS or Xet storage: the Hub names it by a git object's id instead).
    """

    __slots__ = ("name", "source", "sha256", "published")  # noqa: RUF023 - the fields, in order

    name: str
    source: str
    sha256: str
    published: str | None

    @property
    def matches(self) -> bool:
        """Whether the file is the Hub's: its sha256 is the one published."""
        return self.published is not None and self.sha256 == self.published

    @property
    def verdict(self) -> str:
        """The comparison in words, for a message: ``ok``, or what differs."""
        if self.matches:
            return "ok"
        if self.published is None:
            return (
                "not verified: the Hub publishes no sha256 for it (a file kept in git, not "
                "in LFS or Xet storage)"
            )
        return f"sha256 {self.sha256}, but the Hub publishes {self.published}"


def published_sha256(file: SafetensorsFile | Header, /) -> str | None:
    """The sha256 the Hugging Face Hub publishes for the file a header was read from (the
    ``X-Linked-Etag`` of the resolve reply: the LFS object's id), from its identity, at no
    cost: ``published_sha256(open_file("hf://org/repo/model.safetensors"))``. None for a
    file read from elsewhere, or one the Hub keeps in git."""
    from ._fetch import SafetensorsFile

    header = file.header if isinstance(file, SafetensorsFile) else file
    identity = identity_of(header)
    return None if identity is None else linked_sha256(identity.validators)


def verify_files(
    source: Any,
    /,
    *,
    repo: str | None = None,
    revision: str | None = None,
    **transport: Unpack[Transport],
) -> tuple[FileCheck, ...]:
    """Each file's sha256, whole, compared with the one the Hugging Face Hub publishes.

    Args:
        source: An ``hf://`` file or repository (its checkpoint's files: its published
            digests come with its headers, and its bytes are read in full to hash them); a
            local file or folder (every ``*.safetensors`` file under it), a copy of a
            repository: in the Hub's cache (``.../models--org--name/snapshots/<revision>/``,
            whose repository and revision are read from the path) or anywhere with `repo`;
            or any other source `open_file` and `read_checkpoint` take, with `repo`.
        repo: The repository the files are copies of (``org/name``, ``datasets/org/name``
            for another kind), their paths in it those under the folder given (a file's:
            its name). Needed unless `source` says it.
        revision: The repository's revision (branch, tag or commit): the one of the cache's
            path, else ``main``.
        **transport: How the sources and the Hub are reached (`Transport`); a Hub
            ``token`` in ``storage_options``, ``HF_ENDPOINT`` and ``HF_TOKEN`` as for any
            ``hf://`` path.

    Returns:
        A `FileCheck` per file, by its path in the repository: ``.matches`` (all of them for
        copies that are the Hub's files), ``.verdict`` in words.

    Raises:
        ValueError: A local source with no repository given or found in its path.
        RemoteError: The Hub could not be asked (a missing file or repository among them:
            a copy's file the repository does not have at that revision).
        HeaderError, OSError: As reading the source raises them.
    """
    Options.given("verify_files", transport)  # (checked: a misspelt keyword is a TypeError)
    text = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    if isinstance(text, str) and text.startswith("hf://") and repo is None:
        return _of_the_hub(source, transport)
    if isinstance(text, str) and os.path.exists(text):
        named = _local_files(text)
        found = _cached(text)
        base = found[2] if found is not None and repo is None else ""
        if repo is None:
            if found is None:
                raise ValueError(
                    f"{text} is not in the Hub's cache (.../models--<org>--<name>/snapshots/"
                    "<revision>/): say which repository it is a copy of (repo='org/name')"
                )
            repo, revision = found[0], revision or found[1]
        digests = [
            (_join(base, name), path, _local_sha256(path, transport)) for name, path in named
        ]
    else:
        from ._checkpoint import files_of
        from ._hashes import hash_tensors

        if repo is None:
            raise ValueError(f"say which repository {source!r} is a copy of (repo='org/name')")
        target = _verified_file(source, transport)
        opened = files_of(target)
        whole = hash_tensors(target, files=True, **transport).files
        digests = [
            (name or file.location.rsplit("/", 1)[-1], file.source, whole[name or file.source])
            for name, file in opened
        ]
    published = _published(repo, revision or "main", [name for name, _, _ in digests], transport)
    return tuple(
        FileCheck(name, where, digest, found)
        for (name, where, digest), found in zip(digests, published, strict=True)
    )


def _of_the_hub(source: Any, transport: Any) -> tuple[FileCheck, ...]:
    """An ``hf://`` source's files: their bytes hashed, their headers' published digests."""
    from ._checkpoint import files_of
    from ._hashes import hash_tensors

    target = _verified_file(source, transport)
    opened = files_of(target)
    whole = hash_tensors(target, files=True, **transport)
    checks = []
    for name, file in opened:
        digest = whole.files[name or file.source]
        checks.append(
            FileCheck(
                name or file.location.rsplit("/", 1)[-1],
                file.location if file.location.startswith("hf://") else file.source,
                digest,
                published_sha256(file),
            )
        )
    return tuple(checks)


def _verified_file(source: Any, transport: Any) -> Any:
    """`source` opened once, for its files' names and their bytes: a `Checkpoint`, or a
    `SafetensorsFile`."""
    from ._sources import is_checkpoint

    if is_checkpoint(source):
        from ._checkpoint import read_checkpoint

        return read_checkpoint(source, **transport)
    from ._fetch import open_file

    return open_file(source, **transport)


def _local_files(path: str) -> list[tuple[str, str]]:
    """A local source's files: ``(path under the folder given, path)``, every
    ``*.safetensors`` file under a folder (links followed, as the Hub's cache has them), or
    the file itself by its name."""
    if not os.path.isdir(path):
        return [(os.path.basename(path), path)]
    found = []
    for folder, folders, files in os.walk(path, followlinks=True):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(files):
            if name.endswith(".safetensors"):
                full = os.path.join(folder, name)
                found.append((os.path.relpath(full, path).replace(os.sep, "/"), full))
    if not found:
        raise FileNotFoundError(f"{path} has no .safetensors file")
    return found


def _cached(path: str) -> tuple[str, str, str] | None:
    """For a path in the Hub's cache: its repository (``org/name``, with its kind), revision
    and the folder's path in the repository; else None."""
    parts = os.path.abspath(path).replace(os.sep, "/").split("/")
    if not os.path.isdir(path):
        parts = parts[:-1]  # a file: its folder's path in the repository
    for at in range(len(parts) - 2):
        match = _CACHED.fullmatch(parts[at])
        if match is not None and parts[at + 1] == "snapshots":
            kind, org, name = match.groups()
            return f"{_KIND_PREFIX[kind]}{org}/{name}", parts[at + 2], "/".join(parts[at + 3 :])
    return None


def _join(base: str, name: str) -> str:
    return f"{base}/{name}" if base else name


def _local_sha256(path: str, transport: Any) -> str:
    """A local file's sha256, whole: `hash_tensors`' (the file's tensors hashed in the same
    pass), or hashlib's for a file whose header cannot be read (a copy may be damaged
    anywhere)."""
    from ._hashes import hash_tensors

    try:
        return next(iter(hash_tensors(path, files=True, **transport).files.values()))
    except HeaderError:
        import hashlib

        digest = hashlib.sha256()
        with open(path, "rb") as file:
            for piece in iter(lambda: file.read(1 << 20), b""):
                digest.update(piece)
        return digest.hexdigest()


def _published(repo: str, revision: str, names: list[str], transport: Any) -> list[str | None]:
    """The sha256 the Hub publishes for each file of `repo` at `revision`: one request to
    each file's resolve URL, its redirect's ``X-Linked-Etag`` (and 1 byte of the CDN)."""
    from urllib.parse import quote

    from ._sources import open_source
    from ._sources.threads import map_parallel

    options = Options.given("verify_files", transport)
    root = f"hf://{repo.strip('/')}@{quote(revision, safe='')}/"

    def one(name: str) -> str | None:
        file = open_source(root + name, options)
        file.read(0, 1, options.clock())
        return linked_sha256(file.validators)

    return map_parallel(one, names, _LOOKUPS)
