"""Sharded checkpoints: an index file and its shards, read and checked against each other.

Layer: services (on the source layer).

``model.safetensors.index.json`` (transformers, huggingface_hub; diffusers names it
``diffusion_pytorch_model.safetensors.index.json``) maps every tensor to the shard file that
holds it: ``{"metadata": {"total_size": ...}, "weight_map": {tensor: file}}``. Nothing in the
reference checks an index against its shards; this module does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from itertools import chain, repeat
from operator import eq
from types import MappingProxyType

from ._core.fileformat import MAX_HEADER_SIZE
from ._core.header import Header, TensorInfo, TensorTable
from ._core.records import frozen_record, set_fields
from ._documents import json_document
from ._errors import HeaderError, RemoteError
from ._fetch import SafetensorsFile
from ._sources import is_checkpoint, open_source
from ._sources.base import header_of
from ._sources.local import INDEX_NAMES, SINGLE_NAMES, directory_entry, no_entry
from ._sources.options import Options
from ._sources.threads import map_parallel
from ._totals import DtypeTotal, by_dtype

__all__ = ["INDEX_NAMES", "SINGLE_NAMES", "Checkpoint", "DtypeTotal", "by_dtype"]
__all__ += ["directory_entry", "files_of", "is_checkpoint", "no_entry", "read_checkpoint"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any, Final, NoReturn

    from typing_extensions import Unpack

    from ._audit import Finding
    from ._sources.base import RangeFile
    from ._sources.transport import Transport
# The default bound on an index file's size. An index takes about 100 bytes a tensor: a
# DeepSeek-V3-like layout of 89,088 expert tensors, indented as transformers writes it, is
# 8.6 MB, and 500,000 tensors (tests/test_checkpoint.py) are 54 MB. 10^8 bytes is about a
# million tensors, ten times the largest checkpoints published; an endless or hostile index
# costs at most that much reading (and twice that much memory) before it is refused.
_MAX_INDEX_SIZE: Final = 100_000_000
# A header entry beyond its name: ``:{"dtype":"F8_E4M3","shape":[...],"data_offsets":[a,b]},``
# is 51 bytes, with two offsets of up to 20 digits and a shape of several dimensions.
_ENTRY_BYTES: Final = 160
_HEADER_SLACK: Final = 4096  # braces, __metadata__ (usually {"format":"pt"}), padding
_NO_SHARDS: Final[Mapping[str, SafetensorsFile]] = MappingProxyType({})


@frozen_record(uncompared=("shards",))
class Checkpoint:
    """A checkpoint of one or more safetensors files, checked for consistency.

    Attributes:
        files: Shard file name (as the index writes it) -> its `Header`, in shard order (the
            order in which the weight_map first names them).
        weight_map: Tensor name -> the shard file name that holds it.
        metadata: The index's ``"metadata"`` object (``None`` for a single file, or when the
            index has none).
        tensors: Every tensor name -> its `TensorInfo` (offsets within its own shard).
        problems: Findings that are not fatal (``strict=True`` raises them instead), of the
            kinds ``UnlistedTensor`` (in a shard, not in the weight_map) and ``TotalSize``
            (the index's total_size is not the sum of the tensors' bytes).
        shards: Shard file name -> the file opened (a `SafetensorsFile`), for reading its
            tensors: ``read_tensor(checkpoint, name)`` reads from the right one, checked to
            be the file whose header was read. Not compared by ``==``.
    """

    __slots__ = ("files", "weight_map", "metadata", "tensors", "problems", "shards")  # noqa: RUF023

    files: Mapping[str, Header]
    weight_map: Mapping[str, str]
    metadata: Mapping[str, Any] | None
    tensors: Mapping[str, TensorInfo]
    problems: tuple[Finding, ...]
    shards: Mapping[str, SafetensorsFile]

    def __init__(  # noqa: PLR0917 - the fields, in order
        self,
        files: Mapping[str, Header],
        weight_map: Mapping[str, str],
        metadata: Mapping[str, Any] | None,
        tensors: Mapping[str, TensorInfo],
        problems: tuple[Finding, ...],
        shards: Mapping[str, SafetensorsFile] = _NO_SHARDS,
    ) -> None:
        fields = (files, weight_map, metadata, tensors, problems, shards)
        set_fields(self, Checkpoint, fields)

    @property
    def numel(self) -> int:
        """The number of elements of all tensors (their parameters)."""
        return sum(info.numel for info in self.tensors.values())

    @property
    def nbytes(self) -> int:
        """The bytes of all tensors' data."""
        return sum(info.nbytes for info in self.tensors.values())

    def by_dtype(self) -> dict[str, DtypeTotal]:
        """Totals per dtype, in order of the dtypes' names."""
        return by_dtype(self.tensors.values())

    def __repr__(self) -> str:
        files, tensors, problems = len(self.files), len(self.tensors), len(self.problems)
        return (
            f"<Checkpoint {files:,} file{'' if files == 1 else 's'}, "
            f"{tensors:,} tensor{'' if tensors == 1 else 's'}"
            + (f", {problems:,} problem{'' if problems == 1 else 's'}>" if problems else ">")
        )

    def __reduce__(self) -> tuple[object, ...]:
        # Mapping proxies cannot be pickled; rebuild them from plain dicts.
        tensors = self.tensors
        return (
            _frozen_checkpoint,
            (
                dict(self.files),
                dict(self.weight_map),
                None if self.metadata is None else dict(self.metadata),
                tensors if isinstance(tensors, TensorTable) else dict(tensors),
                self.problems,
                dict(self.shards),
            ),
        )


def _frozen_checkpoint(  # noqa: PLR0917 - the fields, in order
    files: dict[str, Header],
    weight_map: dict[str, str],
    metadata: dict[str, Any] | None,
    tensors: Mapping[str, TensorInfo],
    problems: tuple[Finding, ...],
    shards: dict[str, SafetensorsFile] | None = None,
) -> Checkpoint:
    """A `Checkpoint` of these plain values, made read-only (a `TensorTable` is already)."""
    return Checkpoint(
        files=MappingProxyType(files),
        weight_map=MappingProxyType(weight_map),
        metadata=None if metadata is None else MappingProxyType(metadata),
        tensors=tensors if isinstance(tensors, TensorTable) else MappingProxyType(tensors),
        problems=problems,
        shards=MappingProxyType(shards or {}),
    )


def read_checkpoint(
    source: str | os.PathLike[str] | tuple[Any, str],
    /,
    *,
    strict: bool = False,
    max_header_size: int = MAX_HEADER_SIZE,
    max_index_size: int = _MAX_INDEX_SIZE,
    follow_links: bool = False,
    progress: Callable[[int, int], object] | None = None,
    **transport: Unpack[Transport],
) -> Checkpoint:
    """Read a checkpoint: a ``.safetensors`` file, an index JSON, or a directory.

    A directory must hold one of `INDEX_NAMES` or `SINGLE_NAMES`. The source may also be an
    ``http(s)://`` URL of an index JSON (its shards are then read from URLs next to it) or of a
    single file, reached as the `Transport` options say (ignored for local files). An ``hf://``
    path of the Hugging Face Hub is read at its HTTPS URL (`hub_url`; the token of ``HF_TOKEN``
    or of huggingface_hub's login, to the Hub only); one that names a repository without a file
    (``hf://org/repo``, ``hf://org/repo@revision``) is read as the first of
    ``model.safetensors.index.json``, ``model.safetensors`` and the diffusers names that it has.
    It may be an fsspec URL (``s3://``, ``gs://``, ...; ``storage_options`` passed on) or a
    ``(store, path)`` pair of an obstore store or an fsspec filesystem, of an index or a single
    file: shards are then read from beside the index, in the same store. Every shard named by an
    index is read (its header only), in parallel: the index, then every shard's header at once
    (at most ``max_workers`` requests in flight), and checked against the index. A remote
    shard's first read asks for no more than its header is likely to take, as estimated from the
    names the index gives it (at most ``first_read``): a shard's header is usually one request,
    and never one that brings 128 KiB of tensor data with a small header.

    Args:
        max_index_size: The largest index file read, in bytes (default 10^8: an index takes
            about 100 bytes a tensor, so this is about a million tensors, ten times the
            largest published checkpoints). Reading stops one byte past it, locally and
            over HTTP, so an endless index costs no more than this.
        follow_links: Read shards that resolve, through symbolic links, to files outside
            the index's directory. By default they are refused: an index names files inside
            its directory, and a checkpoint from elsewhere may hold links to anything (its
            contents would reach the error messages). Links within the directory are always
            followed, and so are those of a Hugging Face cache snapshot
            (``.../snapshots/<revision>/``) to its repository's ``blobs/``.
        progress: Called as ``progress(shards read, shards in all)`` after each shard's
            header (from the reading threads, one call at a time: keep it quick), for a
            progress display of the caller's; not called for a single file.
        **transport: How a URL or an object store is reached (`Transport`): ``timeout``
            (10 s by default) bounds the whole call, the index and every shard together;
            ``max_workers`` shards are read at once (16 by default: the headers of a
            checkpoint of up to 16 shards in one round trip).

    Local shards (and the file picked from a directory) are opened only if they are regular
    files: a FIFO, a device or a directory named as a shard is refused, never waited on.

    Returns:
        A `Checkpoint`, whose ``shards`` are the files opened: their tensors read with
        `read_tensor` (or ``numpy.load(checkpoint.shards[name])``) are checked to be of the
        files whose headers were read.

    Raises:
        HeaderError: A shard is not a valid safetensors file (the reference's kinds), or
            ``kind == "InvalidIndex"``: the index is not JSON, is larger than
            `max_index_size`, has no ``weight_map`` object of strings, or
            names a shard outside its directory (``..``, an absolute or drive-relative
            path, a URL, a link that leads out), or one that is not a regular file; or
            ``kind == "IndexMismatch"``: a weight_map tensor is missing from its shard, or
            a tensor is in two shards. With ``strict=True``, the findings that ``problems``
            would hold are raised as ``IndexMismatch`` too.
        OSError: A file is missing (the message names it) or cannot be read; `RemoteError`
            for HTTP, network and object-store failures.
    """
    found, _single_file = _opened_checkpoint(
        "read_checkpoint",
        source,
        (strict, max_header_size, max_index_size, follow_links, progress),
        transport,
        nameless=False,
    )
    return found


def _opened_checkpoint(
    function: str,
    source: object,
    how: tuple[bool, int, int, bool, Callable[[int, int], object] | None],
    transport: Mapping[str, Any],
    *,
    nameless: bool,
) -> tuple[Checkpoint, bool]:
    """`read_checkpoint` for `function` (its keywords' errors name it), with `how` its
    arguments (``strict``, the two sizes, ``follow_links``, ``progress``); and whether the
    source was one file rather than a checkpoint's index. `nameless`: a source without a
    name (bytes, a file object) is one file; else it is refused (TypeError), as no
    checkpoint's shards can be found beside it."""
    strict, max_header_size, max_index_size, follow_links, progress = how
    options = Options.given(function, transport)
    clock = options.clock()  # one deadline for the index and every shard
    source_file = open_source(source, options.replace(timeout=None))
    missing = source_file.none_found  # what to say if no file of its candidates exists
    try:
        candidates = source_file.candidates(follow_links=follow_links)
    except TypeError:  # a source without a name (bytes, a file object): no checkpoint
        if not nameless:
            raise
        return _single(source_file, header_of(source_file, max_header_size, clock)), True
    for number, file in enumerate(candidates):  # the first that exists
        try:
            if not file.name.endswith(".json"):
                return _single(file, header_of(file, max_header_size, clock)), True
            raw = file.document(max_index_size, clock)
            break
        except RemoteError as error:
            # A repository the Hub does not have (or will not show without a token) has none
            # of the names either: say that, not that it lacks them.
            if len(candidates) == 1 or error.status != 404 or error.code == "RepoNotFound":
                raise
            if number == len(candidates) - 1:
                raise missing() from None
    metadata, weight_map, names = _index_of(raw, file.shown, max_index_size)
    shard_files = [file.sibling(name) for name in names]
    remote = any(shard.remote for shard in shard_files)
    if remote:  # a small header is not fetched with 128 KiB of data
        for shard, hint in zip(shard_files, _header_hints(weight_map).values(), strict=True):
            shard.header_hint = hint
    read_one: Callable[[RangeFile], Header] = partial(
        header_of, max_header_size=max_header_size, clock=clock
    )
    if progress is not None:
        read_one = _counted(read_one, len(shard_files), progress)
    # Threads for requests that wait on a network; a local header's read is a few system calls
    # that threads only slow down (their hand-offs cost more than the reads).
    workers = options.max_workers if remote else 1
    files = dict(zip(names, map_parallel(read_one, shard_files, workers), strict=True))
    tensors, problems = _check_against_shards(files, weight_map, metadata)
    if strict and problems:
        raise HeaderError("IndexMismatch", "; ".join(finding.message for finding in problems))
    shards = {
        name: SafetensorsFile(header, shard)
        for (name, header), shard in zip(files.items(), shard_files, strict=True)
    }
    checkpoint = _frozen_checkpoint(files, weight_map, metadata, tensors, tuple(problems), shards)
    return checkpoint, False


def files_of(
    source: Any, /, **transport: Unpack[Transport]
) -> list[tuple[str | None, SafetensorsFile]]:
    """The files of what a reader of several files was given, each opened, by name.

    A `Checkpoint`: its shards, by their names. A `SafetensorsFile`: itself (named
    ``None``). Anything else is opened once, as `read_checkpoint` opens it: a checkpoint's
    directory, index or Hub repository gives its shards, by their names; one file (bytes and
    file objects too) is itself, named ``None``.
    """
    if isinstance(source, Checkpoint):
        return list(source.shards.items())
    if isinstance(source, SafetensorsFile):
        return [(None, source)]
    how = (False, MAX_HEADER_SIZE, _MAX_INDEX_SIZE, False, None)
    checkpoint, single = _opened_checkpoint("files_of", source, how, transport, nameless=True)
    if single:
        return [(None, next(iter(checkpoint.shards.values())))]
    return list(checkpoint.shards.items())


def _counted(
    read_one: Callable[[RangeFile], Header], total: int, progress: Callable[[int, int], object]
) -> Callable[[RangeFile], Header]:
    """`read_one`, calling ``progress(shards read, shards in all)`` after each shard."""
    import threading

    lock = threading.Lock()
    done = 0

    def counted(file: RangeFile) -> Header:
        nonlocal done
        header = read_one(file)
        with lock:
            done += 1
            progress(done, total)
        return header

    return counted


def _header_hints(weight_map: Mapping[str, str]) -> dict[str, int]:
    """Each shard's name (in the index's order) -> an upper estimate of its header's bytes.

    An entry is its name and at most `_ENTRY_BYTES` more; the rest of a header (braces,
    ``__metadata__``, padding) is rarely above `_HEADER_SLACK`. A header longer than its
    estimate costs one more request, of exactly the missing bytes.
    """
    hints: dict[str, int] = {}
    for name, shard in weight_map.items():
        hints[shard] = hints.get(shard, 8 + _HEADER_SLACK) + len(name.encode()) + _ENTRY_BYTES
    return hints


def _index_of(
    raw: bytes, where: str, max_index_size: int
) -> tuple[dict[str, Any] | None, dict[str, str], list[str]]:
    """The index's metadata and weight_map, and its shards' names in the index's order;
    its size and the names checked."""
    if len(raw) > max_index_size:
        _refuse_index(where, f"the index is larger than {max_index_size:,} bytes (max_index_size)")
    metadata, weight_map, names = _parse_index(raw, where)
    for name in names:
        _check_shard_name(name, where)
    return metadata, weight_map, names


def _single(file: RangeFile, header: Header) -> Checkpoint:
    name = file.name
    return _frozen_checkpoint(
        {name: header},
        dict.fromkeys(header.tensors, name),
        None,
        header.tensors,
        (),
        {name: SafetensorsFile(header, file)},
    )


def _parse_index(raw: bytes, where: str) -> tuple[dict[str, Any] | None, dict[str, str], list[str]]:
    try:
        document = json_document(raw)
    except ValueError as error:  # (UnicodeDecodeError too)
        _refuse_index(where, f"not a JSON document ({error})")
    if type(document) is not dict:
        _refuse_index(where, "expected a JSON object")
    weight_map = document.get("weight_map")
    if type(weight_map) is not dict:
        _refuse_index(where, 'no "weight_map" object')
    try:  # the distinct values' types, not every value's (a shard has many tensors)
        names = list(dict.fromkeys(weight_map.values()))
    except TypeError:  # a list or an object: unhashable
        names = [None]
    if not {type(name) for name in names} <= {str}:
        _refuse_index(where, '"weight_map" values must be shard file names (strings)')
    metadata = document.get("metadata")
    if metadata is not None and type(metadata) is not dict:
        _refuse_index(where, '"metadata" must be an object')
    return metadata, weight_map, names


def _check_shard_name(name: str, where: str) -> None:
    """A shard must be a file name inside the index's directory (or next to its URL).

    Judged the same on every system: a name that would leave the directory on Windows
    (``C:x``, drive-relative; ``x:stream``, an NTFS stream; a backslash) is refused on POSIX
    too, where it would not.
    """
    parts = name.split("/")  # as PurePosixPath parts it, without a path object a shard
    if (
        not any(part not in {"", "."} for part in parts)  # "", ".", "./"
        or ":" in name  # a drive (C:x is relative to C:'s current directory), a stream, a URL
        or "\\" in name
        or "\0" in name
        or "?" in name
        or "#" in name
        or name.startswith("/")
        or ".." in parts
        or not _utf8_name(name)
    ):
        _refuse_index(where, f"shard name {name!r} is not a file name inside the index's directory")


def _utf8_name(name: str) -> bool:
    """Whether a name can be written in UTF-8, with the undecodable bytes of a POSIX name
    (``"\\udc80"``-``"\\udcff"``) as those bytes: a lone surrogate from JSON's
    ``"\\ud800"`` names no file anywhere, nor a URL."""
    try:
        name.encode("utf-8", "surrogateescape")
    except UnicodeError:
        return False
    return True


def _check_against_shards(
    files: dict[str, Header], weight_map: dict[str, str], metadata: dict[str, Any] | None
) -> tuple[Mapping[str, TensorInfo], list[Finding]]:
    """Every tensor in one shard and where the index puts it; the tensors by name, each
    entry made from its shard's table when asked (not an object per tensor here)."""
    from ._audit import Finding  # on first use, as the audit: the import stays cheap

    # Each shard's names looked up in the weight_map, in C (map, all): no loop in Python and
    # no map of its own unless the index and its shards disagree (then the first difference
    # is found). Every name where the index puts it, and as many names as the index has:
    # the same names, none in two shards.
    get = weight_map.get
    if sum(len(header.tensors) for header in files.values()) == len(weight_map) and all(
        all(map(eq, map(get, header.tensors), repeat(file))) for file, header in files.items()
    ):
        owner: Mapping[str, str] = weight_map
        problems: list[Finding] = []
    else:
        owner, problems = _disagreements(files, weight_map)  # raises on the errors
    total = (metadata or {}).get("total_size")
    # The tensors of a valid file cover its data buffer exactly: their bytes are its size.
    actual = sum(header.data_size for header in files.values())
    if total is not None and total != actual:
        problems.append(
            Finding(
                "TotalSize",
                f"the index's total_size is {total!r}, but the tensors hold {actual:,} bytes",
            )
        )
    return _ShardTensors(owner, files), problems


def _disagreements(
    files: dict[str, Header], weight_map: dict[str, str]
) -> tuple[dict[str, str], list[Finding]]:
    """Where the shards and the index disagree: an error for a tensor in two shards or
    not where the index puts it, findings for those the index does not list; and each
    tensor's shard."""
    from ._audit import Finding

    owner: dict[str, str] = {}
    for file, header in files.items():
        mine = dict.fromkeys(header.tensors, file)
        if not owner.keys().isdisjoint(mine):  # a name seen in an earlier shard
            twice = next(name for name in mine if name in owner)
            raise HeaderError(
                "IndexMismatch",
                f"tensor {twice!r} is in two shards: {owner[twice]!r} and {file!r}",
                tensor=twice,
            )
        owner.update(mine)
    for name, file in weight_map.items():
        if owner.get(name) != file:
            raise HeaderError(
                "IndexMismatch",
                f"the index puts tensor {name!r} in {file!r}, but that shard has no such tensor",
                tensor=name,
            )
    return owner, [
        Finding(
            "UnlistedTensor",
            f"tensor {name!r} is in {owner[name]!r} but not in the index's weight_map",
            name,
        )
        for name in owner
        if name not in weight_map
    ]


class _ShardTensors(Mapping[str, TensorInfo]):
    """A checkpoint's tensors by name, in shard order, each looked up in its shard's table
    (`owner`: each name's shard; the weight_map where it agrees with the shards)."""

    __slots__ = ("_files", "_owner")

    def __init__(self, owner: Mapping[str, str], files: Mapping[str, Header]) -> None:
        self._owner, self._files = owner, files

    def __getitem__(self, name: str) -> TensorInfo:
        return self._files[self._owner[name]].tensors[name]

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(header.tensors for header in self._files.values())

    def __len__(self) -> int:
        return len(self._owner)

    def __contains__(self, name: object) -> bool:
        return name in self._owner

    def __reduce__(self) -> tuple[object, ...]:
        return (dict, (dict(self.items()),))


def _refuse_index(where: str, problem: str) -> NoReturn:
    raise HeaderError("InvalidIndex", f"{where}: {problem}")
