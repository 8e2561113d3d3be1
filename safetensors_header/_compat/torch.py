"""``safetensors.torch``: the reference's torch API (``load_file``, ``save_file``, ``load``,
``save``, ``save_model``, ``load_model`` and its helpers of shared tensors), over
`safetensors_header.torch`.

Layer: adapters (on `safetensors_header.torch` and `safe_open`).

The reference's refusals are kept: `save_file` and `save` refuse tensors that share memory
(tied weights: `save_model` drops the duplicates) and tensors that are not contiguous, with
its errors and words. Beyond it, every function takes any source this project reads (a URL,
an ``hf://`` path, an fsspec URL...).
"""

from __future__ import annotations

import os
from collections import defaultdict

from .._extras import optional_imports

with optional_imports("torch", "safetensors.torch"):
    import torch

from .. import torch as adapter
from .._errors import HeaderError
from ._errors import reference_errors
from ._open import checked_device, safe_open
from ._serialize import TensorSpec, deserialize, serialize, serialize_file

__all__ = ["load", "load_file", "load_model", "save", "save_file", "save_model"]
__all__ += ["storage_ptr", "storage_size"]
# The reference's module has these too (code imports them from here).
__all__ += ["TensorSpec", "deserialize", "safe_open", "serialize", "serialize_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

# The reference's words, which callers (and its tests) match.
_SHARED = (
    "\n            Some tensors share memory, this will lead to duplicate memory on disk and "
    "potential differences when loading them again: {}.\n            A potential way to "
    "correctly save your model is to use `save_model`.\n            More information at "
    "https://huggingface.co/docs/safetensors/torch_shared_tensors\n            "
)
_NOT_CONTIGUOUS = (
    "You are trying to save a non contiguous tensor: `{}` which is not allowed. It either "
    "means you are trying to save tensors which are reference of each other in which case "
    "it's recommended to save only the full tensors, and reslice at load time, or simply "
    "call `.contiguous()` on your tensor to pack it before saving."
)
_SPARSE = (
    "You are trying to save a sparse tensors: `{}` which this library does not support. You "
    "can make it a dense tensor before saving with `.to_dense()` but be aware this might "
    "make a much larger file than needed."
)
_NO_COMPLETE_NAME = (
    "Error while trying to find names to remove to save state dict, but found no suitable "
    "name to keep for saving amongst: {}. None is covering the entire storage.Refusing to "
    "save/load the model since you could be storing much more memory than needed. Please "
    "refer to https://huggingface.co/docs/safetensors/torch_shared_tensors for more "
    "information. Or open an issue."
)


# --- shared tensors ----------------------------------------------------------------------


def storage_ptr(tensor: torch.Tensor) -> int:
    """The address of the storage `tensor` is a view of (0 for a meta tensor)."""
    if tensor.device.type == "meta":
        return 0
    return int(tensor.untyped_storage().data_ptr())


def storage_size(tensor: torch.Tensor) -> int:
    """The size in bytes of the storage `tensor` is a view of."""
    return int(tensor.untyped_storage().nbytes())


def _end_ptr(tensor: torch.Tensor) -> int:
    """The address just past `tensor`'s last element (its start for an empty tensor)."""
    if not tensor.numel():
        return int(tensor.data_ptr())
    return int(tensor.view(-1)[-1].data_ptr()) + int(tensor.element_size())


def _find_shared_tensors(state_dict: Mapping[str, torch.Tensor]) -> list[set[str]]:
    """The names of `state_dict` in groups of tensors whose memory overlaps, one set each,
    in the order of their first name (a tensor alone is a group of one). Meta tensors and
    empty storages are in none: they hold no memory."""
    storages: dict[tuple[object, int, int], list[str]] = defaultdict(list)
    for name, tensor in state_dict.items():
        if tensor.device.type == "meta":
            continue
        pointer, size = storage_ptr(tensor), storage_size(tensor)
        if pointer and size:
            storages[tensor.device, pointer, size].append(name)
    groups: list[set[str]] = []
    for names in storages.values():
        if len(names) == 1:
            groups.append(set(names))
            continue
        # Views of one storage: those whose spans overlap (or chain) are one group.
        spans = sorted(
            (state_dict[name].data_ptr(), _end_ptr(state_dict[name]), name) for name in names
        )
        end = None
        for start, stop, name in spans:
            if end is None or start >= end:
                groups.append({name})
                end = stop
            else:
                groups[-1].add(name)
                end = max(end, stop)
    return groups


def _is_complete(tensor: torch.Tensor) -> bool:
    """Whether `tensor` covers its whole storage, from its start, without gaps."""
    return bool(
        tensor.data_ptr() == storage_ptr(tensor)
        and tensor.numel() * tensor.element_size() == storage_size(tensor)
    )


def _remove_duplicate_names(
    state_dict: Mapping[str, torch.Tensor],
    *,
    preferred_names: Iterable[str] | None = None,
    discard_names: Iterable[str] | None = None,
) -> dict[str, list[str]]:
    """For each group of shared tensors, the name kept -> the names to drop (sorted).

    The name kept covers the whole storage (`_is_complete`): the first such name in sorted
    order, preferring one not in `discard_names`, and above all one in `preferred_names`
    (the names a file holds, when loading). RuntimeError for a group with no such name.
    """
    preferred = set(preferred_names or ())
    discarded = set(discard_names or ())
    removed: dict[str, list[str]] = defaultdict(list)
    for shared in _find_shared_tensors(state_dict):
        complete = sorted(name for name in shared if _is_complete(state_dict[name]))
        if not complete:
            raise RuntimeError(_NO_COMPLETE_NAME.format(shared))
        kept = complete[0]
        kept = next((name for name in complete if name not in discarded), kept)
        kept = next((name for name in complete if name in preferred), kept)
        removed[kept].extend(name for name in sorted(shared) if name != kept)
    return removed


# --- saving ------------------------------------------------------------------------------


def _checked_tensors(tensors: object) -> Mapping[str, torch.Tensor]:
    """`tensors` checked as the reference checks what it saves: a dict of dense tensors,
    none sharing memory with another, each contiguous."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    sparse = []
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(
                f"Key `{name}` is invalid, expected torch.Tensor but received {type(tensor)}"
            )
        if tensor.layout != torch.strided:
            sparse.append(name)
    if sparse:
        raise ValueError(_SPARSE.format(sparse))
    shared = [names for names in _find_shared_tensors(tensors) if len(names) > 1]
    if shared:
        raise RuntimeError(_SHARED.format(shared))
    for name, tensor in tensors.items():
        if not tensor.is_contiguous():
            raise ValueError(_NOT_CONTIGUOUS.format(name))
    return tensors


def save(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file of `tensors` (the reference's, byte for byte).

    Raises:
        ValueError: Not a dict of tensors; a sparse tensor; a tensor that is not contiguous.
        RuntimeError: Tensors that share memory (use `save_model`).
        SafetensorError: What the reference refuses to write (a name ``__metadata__``...).
    """
    checked = _checked_tensors(tensors)
    with reference_errors("serializing"):
        return adapter.save(checked, metadata=metadata)


def save_file(
    tensors: dict[str, torch.Tensor],
    filename: str | os.PathLike[str],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write `save`'s bytes to `filename`, replaced whole (never left half-written); beyond
    the reference, `filename` may be an fsspec URL or a ``(store, path)`` pair. Raises as
    `save`."""
    checked = _checked_tensors(tensors)
    with reference_errors("serializing"):
        adapter.save_file(checked, filename, metadata=metadata)


def save_model(
    model: torch.nn.Module,
    filename: str | os.PathLike[str],
    metadata: dict[str, str] | None = None,
    force_contiguous: bool = True,
) -> None:
    """Save a model's ``state_dict()``, each shared tensor once: of a group of tensors that
    share memory (tied weights), the name that covers it whole is kept and the others are
    dropped, each recorded in the metadata as ``dropped name -> kept name`` (a key the caller
    gave is left as it is). `force_contiguous` saves a non-contiguous tensor's contiguous
    copy; without it such a tensor is refused (ValueError)."""
    state_dict = model.state_dict()
    for kept, dropped in _remove_duplicate_names(state_dict).items():
        for name in dropped:
            if metadata is None:
                metadata = {}
            metadata.setdefault(name, kept)
            del state_dict[name]
    if force_contiguous:
        state_dict = {name: tensor.contiguous() for name, tensor in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata=metadata)
    except ValueError as error:
        if isinstance(error, HeaderError):
            raise
        raise ValueError(
            f"{error} Or use save_model(..., force_contiguous=True), read the docs for "
            "potential caveats."
        ) from None


# --- loading -----------------------------------------------------------------------------


def load_file(
    filename: Any, device: str | int = "cpu", *, backend: str = "mmap"
) -> dict[str, torch.Tensor]:
    """The tensors of a file, by name, in the order of their data, on `device`.

    `filename`: a local path (with the default ``backend="mmap"``, the tensors are views of
    a private map of it), or beyond the reference any source `open_file` reads (only the
    file's bytes are read: over HTTP, one request a span). Raises as `safe_open`.
    """
    with safe_open(filename, "pt", device=device, backend=backend) as file:
        return file.get_tensors()


def load(data: bytes) -> dict[str, torch.Tensor]:
    """The tensors of a whole file's bytes, copied (a write to them never reaches `data`).
    Raises `SafetensorError` (a `HeaderError` too) for bytes that are not a valid file."""
    with reference_errors("deserializing"):
        return adapter.load(data)


def load_model(
    model: torch.nn.Module,
    filename: Any,
    strict: bool = True,
    device: str | int = "cpu",
    *,
    backend: str = "mmap",
) -> tuple[set[str], list[str]]:
    """Load a file into a model, shared tensors as `save_model` saved them.

    The file's tensors are loaded with ``model.load_state_dict(strict=False)``; a name the
    model shares with another that the file holds (under either name) is not missing, and
    one the file holds twice is unexpected.

    Returns:
        ``(missing, unexpected)``: the model's names the file did not give (a set, as the
        reference's), and the file's names the model has no place for (a list).

    Raises:
        RuntimeError: With `strict`, when either is not empty: ``Missing key(s) in
            state_dict: "a", "b"`` and ``Unexpected key(s) in state_dict: ...``, as torch
            words it.
    """
    state_dict = load_file(filename, device=checked_device(device), backend=backend)
    duplicates = _remove_duplicate_names(model.state_dict(), preferred_names=state_dict)
    missing_keys, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing_keys)
    for dropped in duplicates.values():
        for name in dropped:
            if name in missing:
                missing.remove(name)
            else:
                unexpected.append(name)
    if strict and (missing or unexpected):
        message = f"Error(s) in loading state_dict for {type(model).__name__}:"
        if missing:
            shown = ", ".join(f'"{name}"' for name in sorted(missing))
            message += f"\n    Missing key(s) in state_dict: {shown}"
        if unexpected:
            shown = ", ".join(f'"{name}"' for name in sorted(unexpected))
            message += f"\n    Unexpected key(s) in state_dict: {shown}"
        raise RuntimeError(message)
    return missing, unexpected
