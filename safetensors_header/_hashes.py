"""Content hashes of tensors and files: a digest per tensor, one over them all, a fingerprint
that survives resharding, each file's own digest, and their verification.

Layer: services (on the data path).

The format has no checksum, and a file's own hash changes with its metadata. Knowing where
every tensor is, this module hashes each tensor's bytes alone, through the data path (any
source), so that a checkpoint can carry a manifest of its tensors that `update_metadata`
leaves valid; from those digests and the header it makes a fingerprint of the model that
sharding, tensor order, metadata and padding leave unchanged; and in the same pass it can
hash each file whole (``sha256sum``'s digest, which the Hub publishes). Every digest is
defined in docs/integrity.md, byte for byte.

Speed: a local file is hashed through a read-only map of it (no copy out of the page cache),
any other source read into each worker's buffer; on every core, the largest tensors first, a
piece (`_PIECE`) at a time, hashlib and blake3 letting go of the GIL.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

from ._checkpoint import files_of
from ._core.records import frozen_record, set_fields
from ._fetch import map_opened
from ._sources.options import Options
from ._sources.threads import run_parallel

__all__ = ["BLAKE3", "TensorHashes", "hash_tensors", "tensor_fingerprint", "verify_tensors"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import mmap
    from collections.abc import Iterator, Sequence
    from typing import Any, Final, Protocol

    from typing_extensions import Unpack

    from ._core.header import TensorInfo
    from ._fetch import SafetensorsFile
    from ._sources.transport import Transport

    class Hasher(Protocol):
        """What hashlib's objects and blake3's have in common."""

        def update(self, data: memoryview | bytes, /) -> object: ...
        def digest(self) -> bytes: ...
        def hexdigest(self) -> str: ...


# Bytes hashed at a time: a view of a local file's map, or read into a thread's buffer. Over
# a map, 1 to 16 MiB are equal within the noise; read through the data path, a piece costs a
# call, and 1 MiB is faster than 256 KiB, which fits this machine's L2 (benchmarks/README.md).
_PIECE: Final = 1 << 20
# A source whose requests cost more (a URL, an object store: its `gap`, the bytes a request
# is worth) is read in pieces of at least this many of its gaps: 8 MiB for a URL.
_GAPS_PER_PIECE: Final = 8
_IN_FLIGHT: Final = 3  # pieces of a file being hashed whole: one read, one hashed, one spare
BLAKE3: Final = "blake3"  # not in hashlib: the blake3 package's, when it is installed
_MANIFEST_KEYS: Final = ("algorithm", "content", "tensors")
_U64: Final = 8  # bytes of each length and dimension in a tensor's fingerprint record


@frozen_record(module="safetensors_header.integrity")
class TensorHashes:
    """The digests of a file's or a checkpoint's tensors (and files): `hash_tensors`.

    Every digest is defined in docs/integrity.md precisely enough to compute it again.

    Attributes:
        algorithm: The algorithm of every digest: a hashlib name (``"sha256"``) or
            ``"blake3"``.
        tensors: Tensor name -> the hex digest of its bytes (as stored: little-endian, C
            order), in file order (a checkpoint's shards in order).
        content: The hex digest of the tensors' digests, in that order (a hash list): it
            changes when any tensor's bytes, or the tensors' order, change, and never with
            the header (names aside, metadata, padding).
        fingerprint: The model's fingerprint: the digest of the tensors' fingerprints
            (`fingerprints`) in the order of their names. Unchanged by sharding, tensor
            order, metadata and padding; changed by any tensor's name, dtype, shape or
            bytes. ``None`` for a manifest written without one.
        fingerprints: Tensor name -> its fingerprint, the digest of its name, dtype, shape
            and bytes; empty for a manifest written without them.
        files: File -> the hex digest of the whole file, header included (for sha256,
            ``sha256sum``'s and the Hub's): a checkpoint's shards by their names, a single
            file by its source as shown in messages. Empty unless asked for
            (``hash_tensors(..., files=True)``).
    """

    __slots__ = ("algorithm", "tensors", "content", "fingerprint", "fingerprints", "files")  # noqa: RUF023 - the fields, in order

    algorithm: str
    tensors: Mapping[str, str]
    content: str
    fingerprint: str | None
    fingerprints: Mapping[str, str]
    files: Mapping[str, str]

    def __init__(  # noqa: PLR0917 - the fields, in order
        self,
        algorithm: str,
        tensors: Mapping[str, str],
        content: str,
        fingerprint: str | None = None,
        fingerprints: Mapping[str, str] | None = None,
        files: Mapping[str, str] | None = None,
    ) -> None:
        set_fields(
            self,
            TensorHashes,
            (
                algorithm,
                MappingProxyType(dict(tensors)),
                content,
                fingerprint,
                MappingProxyType(dict(fingerprints or {})),
                MappingProxyType(dict(files or {})),
            ),
        )

    def manifest(self) -> dict[str, Any]:
        """The digests as a JSON-able document: ``{"algorithm", "content", "tensors",
        "fingerprint", "fingerprints", "files"}`` (the last three when known)."""
        document: dict[str, Any] = {
            "algorithm": self.algorithm,
            "content": self.content,
            "tensors": dict(self.tensors),
        }
        if self.fingerprint is not None:
            document["fingerprint"] = self.fingerprint
        if self.fingerprints:
            document["fingerprints"] = dict(self.fingerprints)
        if self.files:
            document["files"] = dict(self.files)
        return document

    @classmethod
    def from_manifest(cls, document: object) -> TensorHashes:
        """The digests of a `manifest` document (as read back with ``json.load``): of this
        version, or of one without ``fingerprint``, ``fingerprints`` and ``files``.

        Hex digits of either case are read (and kept in lower case, as ``hexdigest``
        writes them). Raises ValueError, and nothing else, when it is not a manifest: keys
        missing, digests that are not hex strings of the algorithm's length, an algorithm
        that is not a string or not one this Python has.
        """
        if not isinstance(document, Mapping) or not all(key in document for key in _MANIFEST_KEYS):
            raise ValueError(f"a manifest is an object with the keys {', '.join(_MANIFEST_KEYS)}")
        algorithm = document["algorithm"]
        if not isinstance(algorithm, str):
            raise ValueError(f"a manifest's algorithm is a string, not {_described(algorithm)}")
        size = _digest_size(algorithm) * 2
        content = _hex(document["content"], size, algorithm, "content")
        tensors = _digests(document["tensors"], size, algorithm, "tensors")
        fingerprint = document.get("fingerprint")
        if fingerprint is not None:
            fingerprint = _hex(fingerprint, size, algorithm, "fingerprint")
        fingerprints = _digests(document.get("fingerprints", {}), size, algorithm, "fingerprints")
        files = _digests(document.get("files", {}), size, algorithm, "files")
        return cls(algorithm, tensors, content, fingerprint, fingerprints, files)

    def differences(self, other: TensorHashes) -> dict[str, str]:
        """Tensor name -> how `other` differs from these digests: ``"changed"`` (its bytes,
        or, where both have fingerprints, its dtype or shape), ``"missing"`` (not in
        `other`) or ``"added"`` (only in `other`); empty when the same."""
        if other.algorithm != self.algorithm:
            raise ValueError(f"digests of {self.algorithm} and {other.algorithm} do not compare")
        found: dict[str, str] = {}
        for name, digest in self.tensors.items():
            theirs = other.tensors.get(name)
            if theirs is None:
                found[name] = "missing"
            elif not hmac.compare_digest(theirs, digest):
                found[name] = "changed"
            else:
                mine, their_fingerprint = self.fingerprints.get(name), other.fingerprints.get(name)
                if mine is not None and their_fingerprint is not None and mine != their_fingerprint:
                    found[name] = "changed"  # the same bytes as another dtype or shape
        found.update({name: "added" for name in other.tensors if name not in self.tensors})
        return found

    def __repr__(self) -> str:
        count = len(self.tensors)
        return (
            f"<TensorHashes {self.algorithm}, {count:,} tensor{'' if count == 1 else 's'}, "
            f"content {self.content[:16]}...>"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (
            TensorHashes,
            (
                self.algorithm,
                dict(self.tensors),
                self.content,
                self.fingerprint,
                dict(self.fingerprints),
                dict(self.files),
            ),
        )


def hash_tensors(
    source: Any,
    /,
    *,
    algorithm: str = "sha256",
    files: bool = False,
    progress: Callable[[int, int], object] | None = None,
    mmap: bool = False,
    **transport: Unpack[Transport],
) -> TensorHashes:
    """The digest of every tensor's bytes of a file or a checkpoint, one over them all, the
    model's fingerprint, and (with `files`) each file's digest, in one pass over the bytes.

    Args:
        source: A `Checkpoint`, a `SafetensorsFile`, a checkpoint's directory or index (a
            path, or a URL ending in ``.json``), or any source `open_file` takes.
        algorithm: Any algorithm of hashlib of a fixed size (``"sha256"``, ``"blake2b"``,
            ``"sha512"``, ``"sha3_256"``...; not ``"shake_128"``), or ``"blake3"`` when the
            ``blake3`` package is installed (``pip install 'safetensors_header[blake3]'``),
            whose own threads (``max_threads``) take the cores the workers leave.
        files: Also hash each file whole, header included (``TensorHashes.files``): with
            sha256, what ``sha256sum`` prints and the Hub publishes. The bytes are read
            once; each is hashed twice (each file's pieces in order on one core, the
            tensors' on another).
        progress: Called as ``progress(bytes read, bytes in all)`` as the work goes on
            (from the worker threads, one call at a time: keep it quick), for a progress
            bar of the caller's.
        mmap: Hash a local file through a read-only map rather than copies (a tenth less
            processor time); a file cut short meanwhile then ends the process (SIGBUS).
        **transport: How the source is reached (`Transport`); ``max_workers`` threads at
            once (default: the cores, at least 2), each reading a piece into a buffer of
            its own and hashing it; ``timeout`` seconds the whole call may take (default
            ``None``: no bound).

    Returns:
        `TensorHashes`; ``.manifest()`` is its JSON form.

    Raises:
        ValueError: An algorithm hashlib does not have (or ``"blake3"`` without the
            package).
        HeaderError, RemoteError, OSError: As the data path raises them (a file changed
            while it was read: ``FileChanged``).
        TimeoutError: `timeout` was up.
    """
    Options.given("hash_tensors", transport)  # (checked: a misspelt keyword is a TypeError)
    max_workers, timeout = transport.get("max_workers"), transport.get("timeout")
    cores = os.cpu_count() or 1
    workers = max_workers or max(2, cores)
    # blake3's own threads take the cores the workers leave: one each with a worker a core (its
    # threads cost more processor time: benchmarks/README.md); with one worker, every core.
    new = _hasher(algorithm, max(1, cores // workers))
    wide = _hasher(algorithm, cores) if algorithm == BLAKE3 and workers > 1 else new
    named = files_of(source, **transport)
    infos = [(file, info) for _, file in named for info in file.header.tensors.values()]
    deadline, tensor_bytes = _Deadline(timeout), sum(info.nbytes for _, info in infos)
    total = sum(file.header.data_start + file.header.data_size for _, file in named)
    tick = None if progress is None else _Progress(progress, total if files else tensor_bytes)
    digests: dict[str, bytes] = {}
    whole: dict[str, str] = {}
    jobs: list[Any]  # a file's (name, file), or a tensor's (file, info)
    work: Callable[[Any], None]
    if files:
        # Each file is read once, in order: its own digest on one thread, its tensors' on a
        # second (`_whole_file`); as many files at once as there are pairs of workers.
        jobs = sorted(named, key=lambda job: -(job[1].header.file_size or 0))  # largest first
        opened = _Opened([file for _, file in jobs], mapped=mmap)

        def hash_file(job: tuple[str | None, SafetensorsFile]) -> None:
            name, file = job
            whole[name or file.source] = _whole_file(opened.get(file), new, digests, deadline, tick)
            opened.done(file)

        work, workers = hash_file, max(1, workers // 2)
    else:
        # A file at a time (a few maps open at once, however many shards), its largest
        # tensors first, so that the workers finish together.
        jobs = [
            (file, info)
            for _, file in named
            for info in sorted(file.header.tensors.values(), key=lambda info: -info.nbytes)
        ]
        opened = _Opened([file for file, _ in jobs], mapped=mmap)
        # A tensor larger than a worker's share would keep one core busy after the others
        # are done: blake3 spreads it over all of them (sha256 cannot).
        share = tensor_bytes / workers

        def hash_tensor(job: tuple[SafetensorsFile, TensorInfo]) -> None:
            file, info = job
            maker = wide if info.nbytes > share else new
            digests[info.name] = _tensor_digest(opened.get(file), info, maker, deadline, tick)
            opened.done(file)

        work = hash_tensor
    try:
        run_parallel(work, jobs, workers)
    finally:
        opened.close()
    ordered = {info.name: digests[info.name] for _, info in infos}
    content = new()
    for digest in ordered.values():
        content.update(digest)
    fingerprints = {
        info.name: tensor_fingerprint(info.name, info.dtype, info.shape, ordered[info.name], new)
        for _, info in infos
    }
    return TensorHashes(
        algorithm,
        {name: digest.hex() for name, digest in ordered.items()},
        content.hexdigest(),
        _model_fingerprint(fingerprints, new),
        {name: digest.hex() for name, digest in fingerprints.items()},
        {name or file.source: whole[name or file.source] for name, file in named}
        if files
        else None,
    )


def verify_tensors(
    source: Any,
    expected: TensorHashes | Mapping[str, Any],
    /,
    *,
    progress: Callable[[int, int], object] | None = None,
    **transport: Unpack[Transport],
) -> dict[str, str]:
    """Hash `source`'s tensors and compare them with `expected` (`TensorHashes`, or a
    manifest document): tensor name -> ``"changed"``, ``"missing"`` or ``"added"``, empty
    when every tensor matches (`TensorHashes.differences`). `progress` and the transport
    keywords are `hash_tensors'` (the algorithm is the manifest's)."""
    Options.given("verify_tensors", transport)  # (a misspelt keyword named as this function's)
    if not isinstance(expected, TensorHashes):
        expected = TensorHashes.from_manifest(expected)
    found = hash_tensors(source, algorithm=expected.algorithm, progress=progress, **transport)
    return expected.differences(found)


def tensor_fingerprint(
    name: str, dtype: str, shape: Sequence[int], digest: bytes, new: Callable[[], Hasher]
) -> bytes:
    """A tensor's fingerprint: the digest of its record, ``u64(len(name)) name
    u64(len(dtype)) dtype u64(len(shape)) u64(dim)... digest``, where ``name`` is UTF-8,
    ``dtype`` ASCII (the header's ``"BF16"``), ``u64`` 8 bytes little-endian and ``digest``
    the raw digest of the tensor's bytes, and the digest `new()`'s (docs/integrity.md)."""
    encoded, kind = name.encode("utf-8"), dtype.encode("ascii")
    hasher = new()
    hasher.update(
        b"".join(
            [
                _u64(len(encoded)),
                encoded,
                _u64(len(kind)),
                kind,
                _u64(len(shape)),
                *map(_u64, shape),
                digest,
            ]
        )
    )
    return hasher.digest()


def _model_fingerprint(fingerprints: Mapping[str, bytes], new: Callable[[], Hasher]) -> str:
    """The digest of the tensors' fingerprints in the order of their names' UTF-8 bytes
    (which is the order of their code points: Python's order of str)."""
    hasher = new()
    hasher.update(b"".join(fingerprints[name] for name in sorted(fingerprints)))
    return hasher.hexdigest()


def _u64(number: int) -> bytes:
    return number.to_bytes(_U64, "little")


def _piece_spans(start: int, end: int, size: int) -> Iterator[tuple[int, int]]:
    """``(offset, length)`` of each piece of at most `size` bytes of ``[start, end)``."""
    for at in range(start, end, size):
        yield at, min(size, end - at)


class _Bytes:
    """One file's bytes, a piece at a time: pieces read into a thread's buffer through the
    data path, or (`mapped`, a local file) views of a read-only map of the file the header
    was read from (`map_opened` checks its identity), checked again by `close`."""

    def __init__(self, file: SafetensorsFile, mapped: bool) -> None:
        self.file = file
        self.map = _map(file) if mapped else None
        self.view = None if self.map is None else memoryview(self.map)
        self.size = _PIECE if self.view is not None else max(_PIECE, _GAPS_PER_PIECE * file.gap)

    def read(
        self, at: int, count: int, buffer: memoryview | None, deadline: _Deadline
    ) -> memoryview:
        """The piece ``[at, at + count)``: a view of the map, or read into `buffer`."""
        left = deadline.left()
        if self.view is not None:
            return self.view[at : at + count]
        assert buffer is not None
        piece = buffer[:count]
        self.file.read_ranges([(at, count)], into=[piece], gap=0, timeout=left)
        return piece

    def hashed(self, at: int, count: int) -> None:
        """``[at, at + count)`` is hashed: its whole pages are unmapped now, by the worker
        that hashed them (the unmapping spread over the cores; the file's pages stay cached)."""
        import mmap

        page = mmap.PAGESIZE
        low, high = -(-at // page) * page, (at + count) // page * page
        if self.map is not None and high > low and hasattr(mmap, "MADV_DONTNEED"):
            self.map.madvise(mmap.MADV_DONTNEED, low, high - low)

    def buffer(self) -> memoryview | None:
        """The calling thread's buffer for `read`, made once (None for a map: no copy)."""
        if self.view is not None:
            return None
        buffer: memoryview | None = getattr(_piece_buffers, "buffer", None)
        if buffer is None or len(buffer) < self.size:
            buffer = _piece_buffers.buffer = memoryview(bytearray(self.size))
        return buffer[: self.size]

    def close(self, *, check: bool) -> None:
        """Unmap, if mapped; with `check`, first raise FileChanged if the file was rewritten
        or replaced since its header was read (one read of 8 bytes through the data path: a
        file rewritten in place between two pieces, their reads did not see)."""
        mapped, view, self.map, self.view = self.map, self.view, None, None
        if view is not None:
            view.release()
        if check:
            self.file.read_ranges([(0, _U64)], gap=0)
        if mapped is None:
            return
        try:
            mapped.close()
        except BufferError:  # a piece still held (by a traceback): unmapped when it is freed
            return


def _map(file: SafetensorsFile) -> mmap.mmap | None:
    """A read-only map of `file`, of the file its header was read from; None but for a local
    regular file that fits in the address space."""
    try:
        mapped = map_opened(file)
    except (OSError, OverflowError):  # read through the data path, which says what failed
        return None
    if mapped is not None:
        import mmap  # (not at import: its cost)

        if hasattr(mmap, "MADV_SEQUENTIAL"):
            mapped.madvise(mmap.MADV_SEQUENTIAL)  # read ahead of a file that is not cached
    return mapped


class _Opened:
    """Each file's `_Bytes`, made when a worker first needs it and closed (its file checked)
    by the worker that hashes its last tensor: a checkpoint of many shards has a few maps at
    a time (each keeps a descriptor open), and their unmapping is spread over the workers."""

    def __init__(self, files: Sequence[SafetensorsFile], *, mapped: bool) -> None:  # a job's
        self.lock = threading.Lock()
        self.mapped = mapped
        self.open: dict[int, _Bytes] = {}
        self.left: dict[int, int] = {}
        for file in files:
            self.left[id(file)] = self.left.get(id(file), 0) + 1

    def get(self, file: SafetensorsFile) -> _Bytes:
        with self.lock:
            data = self.open.get(id(file))
            if data is None:
                data = self.open[id(file)] = _Bytes(file, self.mapped)
            return data

    def done(self, file: SafetensorsFile) -> None:
        """One more of `file`'s jobs done; after its last, its map closed and checked."""
        with self.lock:
            self.left[id(file)] -= 1
            if self.left[id(file)]:
                return
            data = self.open.pop(id(file))
        data.close(check=True)

    def close(self) -> None:
        """Every map left closed, unchecked (a worker failed: its error is raised)."""
        with self.lock:
            left, self.open = list(self.open.values()), {}
        for data in left:
            data.close(check=False)


_piece_buffers = threading.local()  # each worker's piece buffer


def _tensor_digest(
    data: _Bytes,
    info: TensorInfo,
    new: Callable[[], Hasher],
    deadline: _Deadline,
    tick: _Progress | None,
) -> bytes:
    hasher = new()
    buffer = data.buffer()
    for at, count in _piece_spans(info.start, info.end, data.size):
        hasher.update(data.read(at, count, buffer, deadline))
        data.hashed(at, count)
        if tick is not None:
            tick(count)
    return hasher.digest()


def _whole_file(
    data: _Bytes,
    new: Callable[[], Hasher],
    digests: dict[str, bytes],
    deadline: _Deadline,
    tick: _Progress | None,
) -> str:
    """The digest of the whole file, and (into `digests`) its tensors', from one read of it:
    this thread reads the pieces in order and hashes each into the file's digest, a second
    hashes them into the tensors' digests, at most `_IN_FLIGHT` pieces behind (from a map
    too: a file not in the page cache is read from the disk once)."""
    import queue

    header = data.file.header
    size = header.data_start + header.data_size
    free: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
    for _ in range(_IN_FLIGHT):
        free.put(None if data.view is not None else memoryview(bytearray(data.size)))
    full: queue.SimpleQueue[tuple[int, memoryview, memoryview | None] | None]
    full = queue.SimpleQueue()
    tensors = sorted(header.tensors.values(), key=lambda info: info.start)
    failed: list[BaseException] = []

    def hash_tensors_of_pieces() -> None:
        hashers = [(info, new()) for info in tensors]
        next_tensor = 0
        try:
            while (item := full.get()) is not None:
                at, piece, buffer = item
                end = at + len(piece)
                # The tensors this piece holds bytes of (each piece is read in file order).
                index = next_tensor
                while index < len(hashers) and hashers[index][0].start < end:
                    info, hasher = hashers[index]
                    low, high = max(info.start, at), min(info.end, end)
                    if high > low:
                        hasher.update(piece[low - at : high - at])
                    if info.end <= end:
                        next_tensor = index + 1
                    index += 1
                del piece, item
                data.hashed(at, end - at)  # (hashed whole already, by the reading thread)
                free.put(buffer)
        except BaseException as error:  # re-raised by the reading thread
            failed.append(error)
            free.put(None)  # (the reader, waiting for a buffer, sees `failed` and stops)
            while full.get() is not None:  # (never leave the reader waiting)
                pass
            return
        for info, hasher in hashers:
            digests[info.name] = hasher.digest()

    helper = threading.Thread(target=hash_tensors_of_pieces, name="hash-tensors", daemon=True)
    helper.start()
    whole = new()
    try:
        for at, count in _piece_spans(0, size, data.size):
            buffer = free.get()
            if failed:
                break
            piece = data.read(at, count, buffer, deadline)
            whole.update(piece)
            full.put((at, piece, buffer))
            del piece
            if tick is not None:
                tick(count)
    finally:
        full.put(None)
        helper.join()
    if failed:
        raise failed[0]
    return whole.hexdigest()


class _Progress:
    """``progress(done, total)`` after each piece, one call at a time."""

    def __init__(self, progress: Callable[[int, int], object], total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0
        self.lock = threading.Lock()

    def __call__(self, count: int) -> None:
        with self.lock:
            self.done += count
            self.progress(self.done, self.total)


class _Deadline:
    """The call's deadline: the time each read may still take."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.at = None if timeout is None else time.monotonic() + timeout

    def left(self) -> float | None:
        if self.at is None:
            return None
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the call's timeout of {self.timeout:g} s is up")
        return left


def _hasher(algorithm: object, threads: int = 1) -> Callable[[], Hasher]:
    """A maker of new hashers of `algorithm`, checked: ValueError if there is none. A blake3
    hasher hashes each piece on `threads` threads of its own."""
    _digest_size(algorithm)
    if algorithm == BLAKE3:
        import blake3  # type: ignore[import-not-found, unused-ignore]

        def new_blake3() -> Hasher:
            hasher: Hasher = blake3.blake3(max_threads=threads)
            return hasher

        return new_blake3
    name = str(algorithm)
    return lambda: hashlib.new(name)


def _digest_size(algorithm: object) -> int:
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a str, not {type(algorithm).__name__}")
    if algorithm == BLAKE3:
        try:
            import blake3  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
        except ImportError:
            raise ValueError(
                "blake3 needs the blake3 package: pip install 'safetensors_header[blake3]'"
            ) from None
        return 32  # blake3's default output, what hexdigest() gives
    try:
        size = hashlib.new(algorithm).digest_size
    except ValueError:
        raise ValueError(
            f"unknown hash algorithm {algorithm[:80]!r}; hashlib has "
            f"{', '.join(sorted(hashlib.algorithms_available))}, and blake3 with its package"
        ) from None
    if size == 0:  # shake_*: the length is the caller's
        raise ValueError(f"{algorithm} has no fixed digest size; use sha256, blake2b, ...")
    return size


_DIGEST_DIGITS: Final = "0123456789abcdefABCDEF"


def _hex(text: object, size: int, algorithm: str, where: str) -> str:
    """`text` as a digest of `size` hex digits, in lower case; ValueError if it is none."""
    # Hex digits only (bytes.fromhex would skip spaces and tabs), of the algorithm's length.
    if isinstance(text, str) and len(text) == size and not text.strip(_DIGEST_DIGITS):
        return text.lower()
    raise ValueError(f"{where}: a {algorithm} digest is {size} hex digits, not {_described(text)}")


def _digests(value: object, size: int, algorithm: str, key: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(f"a manifest's {key} are an object of name to hex digest")
    digests = {}
    for name, digest in value.items():
        if not isinstance(name, str):
            raise ValueError(f"a manifest's {key} are named by strings, not {_described(name)}")
        digests[name] = _hex(digest, size, algorithm, f"{key}: {name!r:.80}")
    return digests


def _described(value: object) -> str:
    """A value for a message, in JSON's words: a string quoted and cut, anything else by its
    kind (a repr could be long, or nested past the recursion limit)."""
    if isinstance(value, str):
        return f"{value!r:.80}"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"
