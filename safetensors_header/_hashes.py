"""Content hashes of tensors: a digest per tensor, one over them all, and their verification.

Layer: services (on the data path).

The format has no checksum, and a file's own hash changes with its metadata. Knowing where
every tensor is, this module hashes each tensor's bytes alone, through the data path (any
source), a bounded buffer at a time on every core (hashlib lets go of the GIL for large
buffers), so that a checkpoint can carry a manifest of its tensors that `update_metadata`
leaves valid.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType

from ._checkpoint import files_of
from ._fetch import read_planned
from ._options import Clock
from ._rangefile import run_parallel
from ._record import frozen_record, set_fields

__all__ = ["TensorHashes", "hash_tensors", "verify_tensors"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final

    from ._fetch import SafetensorsFile
    from ._header import TensorInfo

_CHUNK: Final = 8 << 20  # bytes read and hashed at a time, per worker
_MANIFEST_KEYS: Final = ("algorithm", "content", "tensors")


@frozen_record()
class TensorHashes:
    """The digests of a file's or a checkpoint's tensors: `hash_tensors`.

    Attributes:
        algorithm: The hashlib name of the algorithm (``"sha256"``).
        tensors: Tensor name -> the hex digest of its bytes (as stored: little-endian, C
            order), in file order (a checkpoint's shards in order).
        content: The hex digest of the tensors' digests, in that order (a hash list): it
            changes when any tensor's bytes, or the tensors' order, change, and never with
            the header (names aside, metadata, padding).
    """

    __slots__ = ("algorithm", "tensors", "content")  # noqa: RUF023 - the fields, in order

    algorithm: str
    tensors: Mapping[str, str]
    content: str

    def __init__(self, algorithm: str, tensors: Mapping[str, str], content: str) -> None:
        set_fields(self, TensorHashes, (algorithm, MappingProxyType(dict(tensors)), content))

    def manifest(self) -> dict[str, Any]:
        """The digests as a JSON-able document: ``{"algorithm", "content", "tensors"}``."""
        return {"algorithm": self.algorithm, "content": self.content, "tensors": dict(self.tensors)}

    @classmethod
    def from_manifest(cls, document: object) -> TensorHashes:
        """The digests of a `manifest` document (as read back with ``json.load``).

        Raises ValueError when it is not one: keys missing, digests that are not hex
        strings of the algorithm's length, an algorithm hashlib does not have.
        """
        if not isinstance(document, Mapping) or not all(key in document for key in _MANIFEST_KEYS):
            raise ValueError(f"a manifest is an object with the keys {', '.join(_MANIFEST_KEYS)}")
        algorithm, tensors = document["algorithm"], document["tensors"]
        size = _digest_size(algorithm) * 2
        if not isinstance(tensors, Mapping):
            raise ValueError("a manifest's tensors are an object of name to hex digest")
        for name, digest in [("content", document["content"]), *tensors.items()]:
            if not (isinstance(name, str) and _is_hex(digest, size)):
                raise ValueError(
                    f"{name!r:.80}: a {algorithm} digest is {size} hex digits, not {digest!r:.80}"
                )
        return cls(algorithm, tensors, document["content"])

    def differences(self, other: TensorHashes) -> dict[str, str]:
        """Tensor name -> how `other` differs from these digests: ``"changed"``,
        ``"missing"`` (not in `other`) or ``"added"`` (only in `other`); empty when the same."""
        if other.algorithm != self.algorithm:
            raise ValueError(f"digests of {self.algorithm} and {other.algorithm} do not compare")
        found: dict[str, str] = {}
        for name, digest in self.tensors.items():
            theirs = other.tensors.get(name)
            if theirs is None:
                found[name] = "missing"
            elif not hmac.compare_digest(theirs, digest):
                found[name] = "changed"
        found.update({name: "added" for name in other.tensors if name not in self.tensors})
        return found

    def __repr__(self) -> str:
        count = len(self.tensors)
        return (
            f"<TensorHashes {self.algorithm}, {count:,} tensor{'' if count == 1 else 's'}, "
            f"content {self.content[:16]}...>"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (TensorHashes, (self.algorithm, dict(self.tensors), self.content))


def hash_tensors(
    source: Any,
    /,
    *,
    algorithm: str = "sha256",
    max_workers: int | None = None,
    timeout: float | None = None,
    progress: Callable[[int, int], object] | None = None,
) -> TensorHashes:
    """The digest of every tensor's bytes of a file or a checkpoint, and one over them all.

    Args:
        source: A `Checkpoint`, a `SafetensorsFile`, a checkpoint's directory or index (a
            path, or a URL ending in ``.json``), or any source `open_file` takes.
        algorithm: A hashlib algorithm (``"sha256"``, ``"blake2b"``, ``"sha512"``...; not
            one of variable length such as ``"shake_128"``).
        max_workers: Tensors hashed at once (default: the cores, at least 2): each worker
            reads a tensor a few MiB at a time into a buffer of its own and hashes it.
        timeout: Seconds the whole call may take (``None``: no bound).
        progress: Called as ``progress(bytes hashed, bytes in all)`` as the work goes on
            (from the worker threads, one call at a time: keep it quick), for a progress
            bar of the caller's.

    Returns:
        `TensorHashes`; ``.manifest()`` is its JSON form.

    Raises:
        ValueError: An algorithm hashlib does not have.
        HeaderError, RemoteError, OSError: As the data path raises them (a file changed
            while it was read: ``FileChanged``).
    """
    _digest_size(algorithm)
    infos = [(file, info) for _, file in files_of(source) for info in file.header.tensors.values()]
    workers = max_workers or max(2, os.cpu_count() or 1)
    clock = Clock(timeout)
    digests: dict[str, str] = {}
    # The largest tensors first, so that the workers finish together.
    order = sorted(range(len(infos)), key=lambda i: -infos[i][1].nbytes)
    buffers: dict[int, memoryview] = {}
    import threading

    total = sum(info.nbytes for _, info in infos)
    done = 0
    lock = threading.Lock()

    def hashed(count: int) -> None:
        nonlocal done
        with lock:
            done += count
            progress(done, total)  # type: ignore[misc]

    tick = None if progress is None else hashed

    def work(index: int) -> None:
        file, info = infos[index]
        ident = threading.get_ident()
        buffer = buffers.get(ident)
        if buffer is None:
            buffer = buffers[ident] = memoryview(bytearray(_CHUNK))
        digests[info.name] = _digest(file, info, algorithm, buffer, clock, tick=tick)

    run_parallel(work, order, min(workers, len(order)) or 1)
    ordered = {info.name: digests[info.name] for _, info in infos}
    content = hashlib.new(algorithm)
    for digest in ordered.values():
        content.update(bytes.fromhex(digest))
    return TensorHashes(algorithm, ordered, content.hexdigest())


def verify_tensors(
    source: Any, expected: TensorHashes | Mapping[str, Any], /, **options: Any
) -> dict[str, str]:
    """Hash `source`'s tensors and compare them with `expected` (`TensorHashes`, or a
    manifest document): tensor name -> ``"changed"``, ``"missing"`` or ``"added"``, empty
    when every tensor matches. `options` are `hash_tensors`' (the algorithm is the
    manifest's)."""
    if not isinstance(expected, TensorHashes):
        expected = TensorHashes.from_manifest(expected)
    found = hash_tensors(source, algorithm=expected.algorithm, **options)
    return expected.differences(found)


def _digest(
    file: SafetensorsFile,
    info: TensorInfo,
    algorithm: str,
    buffer: memoryview,
    clock: Clock,
    *,
    tick: Callable[[int], None] | None,
) -> str:
    digest = hashlib.new(algorithm)
    at, end = info.start, info.end
    while at < end:
        count = min(len(buffer), end - at)
        piece = buffer[:count]
        read_planned(file, [(at, at + count, [(at, piece)])], clock)
        digest.update(piece)
        at += count
        if tick is not None:
            tick(count)
    return digest.hexdigest()


def _digest_size(algorithm: object) -> int:
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a str, not {type(algorithm).__name__}")
    try:
        size = hashlib.new(algorithm).digest_size
    except ValueError:
        raise ValueError(
            f"unknown hash algorithm {algorithm!r}; hashlib has "
            f"{', '.join(sorted(hashlib.algorithms_available))}"
        ) from None
    if size == 0:  # shake_*: the length is the caller's
        raise ValueError(f"{algorithm} has no fixed digest size; use sha256, blake2b, ...")
    return size


def _is_hex(text: object, size: int) -> bool:
    if not isinstance(text, str) or len(text) != size:
        return False
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True
