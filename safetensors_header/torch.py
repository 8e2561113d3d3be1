"""Load safetensors tensors as torch tensors, from any source, and save torch tensors as
safetensors files, byte for byte as ``safetensors.torch``.

Layer: adapters (on the data path, `safetensors_header._fetch`, read plans and the writer).

    >>> from safetensors_header.torch import load, open_tensors, save_file
    >>> tensors = load("model.safetensors")  # doctest: +SKIP
    >>> tensors["lm_head.weight"].dtype  # doctest: +SKIP
    torch.bfloat16
    >>> lazy = open_tensors("https://host/model.safetensors")  # doctest: +SKIP
    >>> rows = lazy["lm_head.weight"][1024:2048]  # fetches those rows  # doctest: +SKIP
    >>> save_file(tensors, "copy.safetensors")  # the same bytes  # doctest: +SKIP

Needs torch (``pip install 'safetensors_header[torch]'``, or any torch build installed on its
own: docs/torch.md); not numpy, nor the ``safetensors`` package. Importing this module
imports torch.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

from ._extras import optional_imports

with optional_imports("torch", "safetensors_header.torch"):
    import torch

from ._core.fileformat import DTYPES, MAX_HEADER_SIZE
from ._core.geometry import selected
from ._core.header import Header, TensorInfo
from ._encode import TYPE_NAMES
from ._fetch import SafetensorsFile, chosen_tensors, open_to_load, opened
from ._loaders import LazyTensorBase, TensorsBase
from ._plan import ReadPlan
from ._ranks import rank_plan
from ._sources.options import Options
from ._sources.planning import check_fits
from ._writer import file_bytes, write_file

__all__ = ["LazyTensor", "Tensors", "load", "load_plan", "load_rank", "open_tensors"]
__all__ += ["safetensors_dtype", "save", "save_file", "torch_dtype"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, TypeAlias

    from typing_extensions import Unpack

    from ._ranks import RankOptions
    from ._sources import Source
    from ._sources.transport import Transport

    Device: TypeAlias = str | int | torch.device

# Each safetensors dtype's torch dtype, by its name (`TYPE_NAMES`); F4's last dimension is
# half the header's.
# Those this torch has (an older torch lacks the unsigned and float8 types).
_TORCH: dict[str, torch.dtype] = {
    name: getattr(torch, attr) for name, attr in TYPE_NAMES.items() if hasattr(torch, attr)
}
_SAFETENSORS = {dtype: name for name, dtype in _TORCH.items()}


def torch_dtype(dtype: str, /) -> torch.dtype:
    """The torch dtype of a safetensors dtype name: ``torch.bfloat16`` for ``"BF16"``...

    The reference's (``safetensors.torch``): every float8 type by torch's name
    (``F8_E4M3`` is ``torch.float8_e4m3fn``, ``F8_E8M0`` ``torch.float8_e8m0fnu``), ``F4``
    ``torch.float4_e2m1fn_x2`` (two values a byte: its tensors' last dimension is half the
    header's).

    Raises:
        TypeError: ``F6_E2M3`` and ``F6_E3M2`` (6-bit values, four packed in three bytes,
            which no torch dtype holds), a dtype this torch does not have (the unsigned types
            need torch 2.3), or an unknown name.
    """
    found = _TORCH.get(dtype)
    if found is not None:
        return found
    info = DTYPES.get(dtype)
    if info is None:
        raise TypeError(f"unknown safetensors dtype {dtype!r}")
    if dtype not in TYPE_NAMES:
        raise TypeError(
            f"dtype {dtype} packs {info.bits}-bit values across byte boundaries, which no "
            "torch dtype can hold; read its bytes with safetensors_header.read_tensor (or "
            "pass names= to load the other tensors)"
        )
    raise TypeError(
        f"dtype {dtype} needs torch.{TYPE_NAMES[dtype]}, which torch {torch.__version__} lacks"
    )


def safetensors_dtype(tensor_or_dtype: torch.Tensor | torch.dtype, /) -> str:
    """The safetensors dtype name of a torch tensor or dtype: ``"F32"``, ``"BF16"``...

    The inverse of `torch_dtype`. Raises TypeError for a dtype safetensors has no name for
    (``torch.complex128``, ``torch.float4_e2m1fn`` without ``_x2``, quantized types...).
    """
    dtype = tensor_or_dtype.dtype if isinstance(tensor_or_dtype, torch.Tensor) else tensor_or_dtype
    found = _SAFETENSORS.get(dtype)
    if found is None:
        raise TypeError(f"no safetensors dtype for {dtype}: its dtypes are {', '.join(_TORCH)}")
    return found


def _shape(name: str, dtype: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A tensor's shape in torch: the header's, but for F4's last dimension (halved)."""
    if dtype != "F4":
        return shape
    if not shape or shape[-1] % 2:
        raise TypeError(
            f"tensor {name!r}: torch holds F4 as float4_e2m1fn_x2, two values a byte along "
            f"the last dimension, which must then be even; its shape is {list(shape)}"
        )
    return (*shape[:-1], shape[-1] // 2)


def _form(name: str, dtype: str, shape: tuple[int, ...]) -> tuple[torch.dtype, tuple[int, ...]]:
    """A tensor's torch dtype and shape (TypeError where torch cannot hold it)."""
    return torch_dtype(dtype), _shape(name, dtype, shape)


def load(
    source: Source,
    /,
    *,
    names: Iterable[str] | None = None,
    device: Device = "cpu",
    into: Mapping[str, torch.Tensor] | None = None,
    header: Header | None = None,
    mmap: bool | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    **transport: Unpack[Transport],
) -> dict[str, torch.Tensor]:
    """Load tensors of a safetensors file as torch tensors.

    The values, dtypes and shapes are those of ``safetensors.torch.load_file`` (and
    ``safetensors.torch.load`` for bytes); the header is validated as the reference does
    (`HeaderError`), and the data is read from the very file the header came from.

    Each tensor wraps the memory its bytes were read into, once (``torch.frombuffer``): no
    copy follows the read. Adjacent tensors are read as one span (one request for a URL, or
    parallel parts of a long one: `Transport`'s ``part_size``), and share its buffer. Every
    tensor is writable.

    Args:
        source: A local path: by default mapped copy-on-write, as the reference maps it,
            so that nothing is read until used and a write to a tensor changes it, never the
            file; with ``mmap=False`` read into memory with ``os.preadv``. An ``http(s)://``
            URL, an ``hf://`` path, an fsspec URL or a ``(store, path)`` pair (as for
            `read_header`): the header, then only the chosen tensors' bytes, read into
            memory. A bytes-like object holding the whole file: the tensors are copied from
            it, once (a write to them never reaches it). A binary file object, or a
            `SafetensorsFile` (from `open_file`, or ``Checkpoint.shards``: its header is not
            read again).
        names: The tensors to load (default: all, or those of `into`), in the order of
            the result.
        device: Where the tensors go (``"cuda:0"``, ``torch.device("mps")``...): each is
            read into host memory, then moved, with ``non_blocking`` from pinned memory
            (then the device is synchronized once, at the end).
        into: Tensors to read into, by name: each named tensor's bytes are read straight
            into that tensor's memory, which must be on the CPU, contiguous, and of the
            tensor's torch dtype and shape (pinned buffers, for a fast copy to a GPU with
            `device`; a model's own parameters). The result holds those very tensors (or,
            with `device`, their copies there). Its names are loaded (and must be in
            `names`, when given).
        header: The file's header, read before (``Checkpoint.files[shard]``, say): not read
            again (for a URL or an object store, one request saved), and the file checked to
            be the one it was read from, as `open_file` checks it (``FileChanged``).
        mmap: For a local path: map the file (the default) or read it (``False``).
        max_header_size: The largest header length accepted; see `parse_header`.
        **transport: How a URL or an object store is reached (`Transport`): ``timeout``
            bounds the header's read (10 s by default) and then the tensors' (none by
            default); a local file read into memory is spread over at most ``max_workers``
            cores.

    Returns:
        Tensor name -> tensor, in the file's order (or the order of `names`).

    Raises:
        HeaderError: The file is not valid (as for `read_header`), ended before its data
            did, or changed while it was read (``FileChanged``).
        KeyError: A name in `names` or `into` is not in the file.
        TypeError: A dtype torch cannot hold (``F6_*``; see `torch_dtype`), checked before
            any tensor is read; a value of `into` that is not a tensor.
        ValueError: A tensor of `into` of another dtype or shape, not contiguous, or not on
            the CPU; a name of `into` not in `names`.
        RemoteError: For URLs and object stores, as for `read_ranges`.
    """
    target = torch.device(device)  # a bad device fails before anything is read
    if into is not None:
        if names is None:
            names = list(into)
        else:
            names = list(names)
            loaded = set(names)
            left_out = [name for name in into if name not in loaded]
            if left_out:
                raise ValueError(f"into names tensors that names leaves out: {left_out}")
    # A local file: the header and a private, copy-on-write map (a write to a tensor changes
    # the memory, never the file), of one descriptor's file, the header given held to it.
    file, mapped = open_to_load(
        "load",
        source,
        transport,
        header=header,
        max_header_size=max_header_size,
        mmap=False if into is not None else mmap,
        copy=True,
    )
    chosen = chosen_tensors(file.header, names)
    forms = [_form(info.name, info.dtype, info.shape) for info in chosen]  # before reading
    timeout = transport.get("timeout")
    if mapped is not None:
        memory = memoryview(mapped)
        tensors = {
            info.name: _tensor(memory[info.start : info.end], dtype, shape)
            for info, (dtype, shape) in zip(chosen, forms, strict=True)
        }
    elif into is None:
        pieces = file.read_tensors(chosen, timeout=timeout)
        tensors = {
            info.name: _tensor(pieces[info.name], dtype, shape)
            for info, (dtype, shape) in zip(chosen, forms, strict=True)
        }
    else:
        tensors = _read_into(file, chosen, forms, into, timeout)
    return _moved(tensors, target)


def _tensor(data: memoryview, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """A tensor over `data` (little-endian, C order): its memory when writable, else a copy."""
    if not data.nbytes:  # torch.frombuffer refuses an empty buffer
        return torch.empty(shape, dtype=dtype)
    if data.readonly:  # (torch would warn, and let a write change bytes that must not change)
        data = memoryview(bytearray(data))
    tensor = torch.frombuffer(data, dtype=dtype)
    if sys.byteorder == "big":
        tensor = _swapped(tensor)
    return tensor.reshape(shape)


def _swapped(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of a flat tensor with each number's bytes reversed: the file's little-endian
    order to a big-endian machine's, or back (a complex number is two floats, each swapped)."""
    unit = tensor.element_size() // (2 if tensor.is_complex() else 1)
    if unit == 1:
        return tensor
    flipped = tensor.view(torch.uint8).reshape(-1, unit).flip(1)
    return flipped.reshape(-1).view(tensor.dtype)


def _memory(tensor: torch.Tensor) -> memoryview:
    """A writable view of a CPU tensor's bytes (a torch tensor has no buffer protocol)."""
    count = tensor.numel() * tensor.element_size()
    if not count:
        return memoryview(bytearray())
    return memoryview((ctypes.c_ubyte * count).from_address(tensor.data_ptr())).cast("B")


def _read_into(
    file: SafetensorsFile,
    chosen: list[TensorInfo],
    forms: list[tuple[torch.dtype, tuple[int, ...]]],
    into: Mapping[str, torch.Tensor],
    timeout: float | None,
) -> dict[str, torch.Tensor]:
    """The tensors read straight into `into`'s tensors, and the others into new ones."""
    tensors = {}
    check_fits(sum(info.nbytes for info in chosen if info.name not in into))
    for info, (dtype, shape) in zip(chosen, forms, strict=True):
        given = into.get(info.name)
        if given is None:
            tensors[info.name] = torch.empty(shape, dtype=dtype)
            continue
        if not isinstance(given, torch.Tensor):
            raise TypeError(f"into[{info.name!r}] is a {type(given).__name__}, not a tensor")
        if given.dtype != dtype or tuple(given.shape) != shape:
            raise ValueError(
                f"into[{info.name!r}] is a {given.dtype} tensor of shape {list(given.shape)}; "
                f"the file's is {dtype} of shape {list(shape)}"
            )
        if given.device.type != "cpu" or given.layout != torch.strided:
            raise ValueError(f"into[{info.name!r}] is on {given.device}: it must be in CPU memory")
        if not given.is_contiguous():
            raise ValueError(f"into[{info.name!r}] is not contiguous")
        tensors[info.name] = given
    buffers = [_memory(tensors[info.name]) for info in chosen]
    file.read_ranges([(info.start, info.nbytes) for info in chosen], into=buffers, timeout=timeout)
    if sys.byteorder == "big":
        for tensor in tensors.values():
            tensor.view(-1).copy_(_swapped(tensor.view(-1)))
    return tensors


def _moved(tensors: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """The tensors on `device`: copies made with ``non_blocking`` from pinned memory, the
    device synchronized once after them (so that the host memory may be reused at once)."""
    if device.type == "cpu":
        return tensors
    pinned = False
    moved = {}
    for name, tensor in tensors.items():
        fast = tensor.is_pinned()
        pinned |= fast
        moved[name] = tensor.to(device, non_blocking=fast)
    if pinned:
        torch.accelerator.synchronize(device)
    return moved


def open_tensors(
    source: Source,
    /,
    *,
    device: Device = "cpu",
    header: Header | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    gap: int | None = None,
    **transport: Unpack[Transport],
) -> Tensors:
    """The tensors of a file, each read only when (and as far as) it is indexed: the
    reference's ``safe_open(..., framework="pt")`` and ``get_slice``, from any source.

    Reads the header now (validated, as `read_header` does), nothing else:
    ``tensors[name][key]`` then reads only the bytes of that selection, in as few requests
    as `read_ranges` needs, straight into a new tensor's memory; ``tensors[name][...]`` is
    the whole tensor. `key` is numpy's basic indexing: ints, slices with any step (negative
    too, which torch's own indexing lacks), ``...``. A tensor-parallel rank reads its rows
    with ``tensors[name][rank * n : (rank + 1) * n]``. Every read is checked to be of the
    file the header came from.

    Args: as for `load`; `gap` is `read_ranges`' (runs of a selection less than `gap` bytes
    apart are one request; default: the file's, `SafetensorsFile.gap`).
    """
    target = torch.device(device)
    options = Options.given("open_tensors", transport, timeout=None)
    file = opened(source, options, header=header, max_header_size=max_header_size)
    return Tensors(file, target, gap=gap, timeout=options.timeout)


class Tensors(TensorsBase["LazyTensor"]):
    """Tensor name -> `LazyTensor`, in the file's order; made by `open_tensors`.

    Attributes:
        header: The file's `Header` (``header.metadata`` is the reference's ``metadata()``).
        file: The `SafetensorsFile` its tensors are read from.
    """

    __slots__ = ("_device", "_gap", "_timeout")

    def __init__(
        self,
        file: SafetensorsFile,
        device: torch.device,
        *,
        gap: int | None = None,
        timeout: float | None = None,
    ) -> None:
        super().__init__(file)
        self._device = device
        self._gap = gap
        self._timeout = timeout

    def _lazy(self, info: TensorInfo) -> LazyTensor:
        return LazyTensor(info, self)


class LazyTensor(LazyTensorBase):
    """One tensor of a file, not read yet: index it to read (part of) it as a tensor.

    Attributes:
        info: Its `TensorInfo` (name, dtype name, shape as in the header, byte range).
    """

    __slots__ = ("_tensors",)

    def __init__(self, info: TensorInfo, tensors: Tensors) -> None:
        super().__init__(info)
        self._tensors = tensors  # the file, and how its tensors are read

    @property
    def shape(self) -> torch.Size:
        """The shape in torch (F4's last dimension is half the header's)."""
        return torch.Size(_shape(self.info.name, self.info.dtype, self.info.shape))

    @property
    def dtype(self) -> torch.dtype:
        """The torch dtype (TypeError for F6: see `torch_dtype`)."""
        return torch_dtype(self.info.dtype)

    def __getitem__(self, key: object) -> torch.Tensor:
        """``tensor[key]`` (numpy's basic indexing, on the torch shape), reading only its
        bytes."""
        dtype = self.dtype
        info = self.info
        if info.dtype == "F4":  # indexed as torch sees it: bytes along the last dimension
            shape = _shape(info.name, info.dtype, info.shape)
            info = TensorInfo(info.name, "U8", shape, info.start, info.end, info.data_start)
        ranges, shape = selected(info, key)  # checks the key before anything is read
        check_fits(sum(length for _, length in ranges))
        tensor = torch.empty(shape, dtype=dtype)
        if ranges:
            memory, views, at = _memory(tensor), [], 0
            for _, length in ranges:
                views.append(memory[at : at + length])
                at += length
            tensors = self._tensors
            tensors.file.read_ranges(ranges, gap=tensors._gap, into=views, timeout=tensors._timeout)
            if sys.byteorder == "big":
                tensor.view(-1).copy_(_swapped(tensor.view(-1)))
        return _moved({"": tensor}, self._tensors._device)[""]


def load_plan(
    plan: ReadPlan, /, *, device: Device = "cpu", timeout: float | None = None
) -> dict[str, torch.Tensor]:
    """Execute a `ReadPlan`: each tensor's selection as a torch tensor, by name.

    The tensors have the tensors' torch dtypes (see `torch_dtype`) and the selections'
    shapes; each wraps the buffer its bytes were read into (no copy), then goes to `device`
    as in `load`. Raises as `ReadPlan.read`, and TypeError for a dtype torch cannot hold
    (checked before anything is read).
    """
    target = torch.device(device)
    forms = {tensor.name: _form(tensor.name, tensor.dtype, tensor.shape) for tensor in plan.tensors}
    buffers = plan.read(timeout=timeout)
    tensors = {name: _tensor(buffers[name], *form) for name, form in forms.items()}
    return _moved(tensors, target)


def load_rank(
    source: Any, /, rank: int, world: int, *, device: Device = "cpu", **options: Unpack[RankOptions]
) -> dict[str, torch.Tensor]:
    """Rank `rank` of `world`'s share of every tensor of a file or a checkpoint, as tensors.

    Each tensor is whole, or the part of it that the rules of tensor parallelism for the
    model's architecture name (`plan_rank`), cut as ``torch.tensor_split(tensor, world,
    axis)[rank]`` (numpy's ``array_split``; a fused QKV part by part); only those bytes are
    read, with the gaps between them joined as `gap`, `max_over_read` and `max_requests` say
    (see `plan_reads`). A tensor no rule decides is whole, with a warning, or refused with
    `strict`.

    Args:
        source: A `Checkpoint`, a `SafetensorsFile`, a checkpoint's directory or index
            (a path or a URL ending in ``.json``), or any source `open_file` takes.
        device: As for `load`.
        **options: `plan_rank`'s keywords (``config``, ``axes``, ``strict``, ``gap``,
            ``max_over_read``, ``max_requests``) and how the source is reached
            (`Transport`); ``timeout`` bounds the reads of the data (none by default).
    """
    target = torch.device(device)
    plan = rank_plan("load_rank", source, rank, world, options)
    return load_plan(plan, device=target, timeout=options.get("timeout"))


# --- writing -----------------------------------------------------------------------------


def save(
    tensors: Mapping[str, torch.Tensor], /, *, metadata: Mapping[str, str] | None = None
) -> bytes:
    """The bytes of a safetensors file of these tensors: what ``safetensors.torch.save``
    makes for the same tensors (and metadata of at most one key, whose order the reference
    leaves to chance).

    Each tensor is written with its dtype's safetensors name (`safetensors_dtype`) and its
    shape (an ``F4`` tensor's last dimension twice torch's), little-endian, in C order. A
    tensor on another device is copied to the CPU first. The reference refuses tensors that
    are not contiguous, and tensors that share memory (tied weights); here each is written
    as its values are, in full.

    Raises:
        TypeError: A value that is not a dense torch tensor, or of a dtype safetensors has no
            name for (the message names the tensor); a name or metadata that is not ``str``.
        HeaderError: What the file's reader would refuse (a name ``__metadata__``...).
    """
    specs, _kept = _specs(tensors)  # the tensors kept alive while their bytes are read
    return file_bytes(specs, metadata=metadata)


def save_file(
    tensors: Mapping[str, torch.Tensor],
    path: str | os.PathLike[str],
    /,
    *,
    metadata: Mapping[str, str] | None = None,
) -> Header:
    """`save`'s bytes, written to `path` by `write_file` (the file replaced whole, never left
    half-written); returns the new file's `Header`. A file this module loads is written
    again byte for byte (with metadata of at most one key).
    """
    specs, _kept = _specs(tensors)
    return write_file(path, specs, metadata=metadata)


def _specs(
    tensors: Mapping[str, torch.Tensor],
) -> tuple[dict[str, tuple[str, tuple[int, ...], memoryview]], list[torch.Tensor]]:
    """Each tensor as ``(dtype, shape, its bytes)`` for the writer, and the CPU tensors that
    hold those bytes (which must outlive the writing)."""
    if not isinstance(tensors, Mapping):
        raise TypeError(
            f"tensors must be a mapping of name to tensor, not {type(tensors).__name__}"
        )
    specs, kept = {}, []
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"tensor {name!r}: expected a torch.Tensor, not {type(tensor).__name__}"
            )
        if tensor.layout != torch.strided:
            raise TypeError(
                f"tensor {name!r} is {tensor.layout}: safetensors holds dense tensors "
                "(.to_dense() makes one)"
            )
        try:
            dtype = safetensors_dtype(tensor)
        except TypeError as error:
            raise TypeError(f"tensor {name!r}: {error}") from None
        shape = tuple(tensor.shape)
        if dtype == "F4" and shape:
            shape = (*shape[:-1], shape[-1] * 2)
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        if sys.byteorder == "big":
            flat = _swapped(flat)
        kept.append(flat)
        specs[name] = (dtype, shape, _memory(flat))
    return specs, kept
