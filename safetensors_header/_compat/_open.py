"""``safe_open``: the reference's lazy handle on a file, over this project's data path.

Layer: adapters (on the data path and the numpy, torch and JAX adapters).

The reference checks its arguments in the order of its signature (framework, device,
backend), then opens the file, then reads its header; its errors are `SafetensorError` with
the words below, and `FileNotFoundError` for a file it cannot open. Beyond it, the file may
be any source `open_file` reads (a URL, an ``hf://`` path, an fsspec URL, a ``(store, path)``
pair, a binary file object), read lazily: a tensor's bytes when it is asked for.
"""

from __future__ import annotations

import io
import numbers
import operator
import os
import warnings
from importlib import import_module

from .._errors import HeaderError
from .._fetch import SafetensorsFile, open_file
from ._errors import SafetensorError, as_reference_error, reference_errors

__all__ = ["SafeSlice", "TorchSlice", "checked_device", "safe_open", "safe_open_handle"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .._core.header import Header, TensorInfo

# The reference's names of each framework -> the one this module goes by, and the name its
# messages give it.
_FRAMEWORKS = {
    **dict.fromkeys(("pt", "torch", "pytorch"), "pt"),
    **dict.fromkeys(("np", "numpy"), "np"),
    **dict.fromkeys(("tf", "tensorflow"), "tf"),
    **dict.fromkeys(("jax", "flax"), "flax"),
    "mlx": "mlx",
    "paddle": "paddle",
}
_FRAMEWORK_NAMES = {
    "pt": "pytorch",
    "np": "numpy",
    "tf": "tensorflow",
    "flax": "flax",
    "mlx": "mlx",
    "paddle": "paddle",
}
# The frameworks whose arrays are made from numpy's: (module, function) that converts one.
_CONVERTERS = {
    "tf": ("tensorflow", "convert_to_tensor"),
    "mlx": ("mlx.core", "array"),
    "paddle": ("paddle", "to_tensor"),
}
# The accelerators the reference names, each with an index (``cuda`` is ``cuda:0``).
_ACCELERATORS = ("cuda", "musa", "npu", "xpu", "xla", "mlu", "hpu")
_BACKENDS = ("mmap", "pread")


def checked_framework(framework: object, /) -> str:
    """The framework's short name (``"pt"``, ``"np"``, ``"tf"``, ``"flax"``, ``"mlx"``,
    ``"paddle"``), or the reference's error."""
    found = _FRAMEWORKS.get(framework) if isinstance(framework, str) else None
    if found is None:
        raise SafetensorError(f"framework {framework} is invalid")
    return found


def checked_device(device: object, /) -> str | int:
    """The device as the reference reads it: ``"cpu"``, ``"mps"``, ``"cuda:0"`` (for
    ``"cuda"``), an accelerator's index as an int; a ``torch.device`` as its name (which the
    reference refuses). `SafetensorError` with the reference's words for any other."""
    if isinstance(device, bool):
        raise SafetensorError(f"device {device!r} is invalid")
    if isinstance(device, int):
        if device < 0:
            raise SafetensorError(f"device {device!r} is invalid")
        return device
    if not isinstance(device, str) and isinstance(getattr(device, "type", None), str):
        device = str(device)  # a torch.device
    if not isinstance(device, str):
        raise SafetensorError(f"device {device!r} is invalid")
    if device in ("cpu", "mps"):
        return device
    if device in _ACCELERATORS:
        return f"{device}:0"
    kind, colon, index = device.partition(":")
    if colon and (kind in _ACCELERATORS or kind == "mps") and index.isdigit():
        if kind == "mps":
            if int(index):
                raise SafetensorError(f"device {device} is invalid: only mps or mps:0 is supported")
            return "mps"
        return f"{kind}:{int(index)}"
    raise SafetensorError(f"device {device} is invalid")


def _checked_backend(backend: object) -> bool:
    """Whether to map a local file (``"mmap"``) or read it (``"pread"``)."""
    if backend not in _BACKENDS:
        shown = f'"{backend}"' if isinstance(backend, str) else repr(backend)
        raise SafetensorError(f'backend {shown} is invalid (expected one of: "mmap", "pread")')
    return backend == "mmap"


def opened(source: object, /) -> SafetensorsFile:
    """`source` opened and its header validated, with the reference's errors: a local file
    that is not there is ``FileNotFoundError("No such file or directory: <path>")``, a bad
    header `SafetensorError` (that is a `HeaderError` too)."""
    if isinstance(source, SafetensorsFile):
        return source
    if isinstance(source, io.TextIOBase):
        raise TypeError(
            "a file opened in text mode cannot be read: open it in binary mode ('rb'), "
            "or pass its path"
        )
    try:
        return open_file(source)  # type: ignore[arg-type]
    except FileNotFoundError as error:
        if error.filename is None:
            raise
        raise FileNotFoundError(f"No such file or directory: {error.filename}") from None
    except HeaderError as error:
        raise as_reference_error(error, "deserializing header") from None


class safe_open:
    """A safetensors file opened lazily: its tensors read as asked, in a framework's type.

    The reference's ``safe_open(filename, framework, device="cpu", *, backend="mmap")``:
    ``keys()`` (sorted), ``offset_keys()`` (in the order of their data), ``metadata()``,
    ``get_tensor(name)``, ``get_tensors()``, ``get_slice(name)``; a context manager, after
    which every method raises ``SafetensorError("File is closed")``.

    Args:
        filename: A local path (as the reference), or any source `open_file` reads: a URL,
            an ``hf://`` path, an fsspec URL, a ``(store, path)`` pair, a binary file
            object. The header is read now; a tensor's bytes when it is asked for (over
            HTTP, only those bytes).
        framework: ``"pt"`` (``"torch"``, ``"pytorch"``), ``"np"`` (``"numpy"``), ``"flax"``
            (``"jax"``), ``"tf"``, ``"mlx"``, ``"paddle"``.
        device: Where torch (or paddle) tensors go: ``"cpu"``, ``"cuda:1"``, an index...
            Other frameworks take ``"cpu"`` only, as in the reference.
        backend: ``"mmap"`` maps a local file (torch tensors are views of the map, copied on
            write), ``"pread"`` reads it.

    Raises:
        SafetensorError: A framework, device or backend the reference does not know; a
            device other than the CPU for numpy or JAX; a header that is not valid (a
            `HeaderError` too); later, a tensor the file does not hold.
        FileNotFoundError: A local file that is not there.
    """

    def __init__(
        self, filename: Any, framework: str, device: Any = "cpu", *, backend: str = "mmap"
    ) -> None:
        self._framework = checked_framework(framework)
        self._device = checked_device(device)
        self._mmap = _checked_backend(backend)
        file = opened(filename)
        if self._device != "cpu" and self._framework not in ("pt", "paddle"):
            shown = _FRAMEWORK_NAMES[self._framework]
            raise SafetensorError(f"Device {self._device} is not supported for framework {shown}")
        self._file: SafetensorsFile | None = file
        self._path = file.local_path

    def _opened(self) -> SafetensorsFile:
        if self._file is None:
            raise SafetensorError("File is closed")
        return self._file

    @property
    def header(self) -> Header:
        """The file's `Header` (beyond the reference: dtypes, shapes, byte ranges)."""
        return self._opened().header

    def metadata(self) -> dict[str, str] | None:
        """The header's ``__metadata__``, or None."""
        metadata = self._opened().header.metadata
        return None if metadata is None else dict(metadata)

    def keys(self) -> list[str]:
        """The tensors' names, sorted."""
        return sorted(self._opened().header.tensors)

    def offset_keys(self) -> list[str]:
        """The tensors' names in the order of their data in the file."""
        return list(self._opened().header.tensors)

    def _info(self, name: str) -> TensorInfo:
        info = self._opened().header.tensors.get(name)
        if info is None:
            raise SafetensorError(f"File does not contain tensor {name}")
        return info

    def get_tensor(self, name: str) -> Any:
        """The whole tensor `name`, in the framework's type, on the device."""
        info = self._info(name)
        return self._read([info.name])[info.name]

    def get_tensors(self) -> dict[str, Any]:
        """Every tensor, by name, in the order of their data (`offset_keys`)."""
        return self._read(None)

    def _read(self, names: list[str] | None) -> dict[str, Any]:
        file = self._opened()
        framework = self._framework
        try:
            if framework == "pt":
                from .. import torch as adapter

                source: Any = file if self._path is None or not self._mmap else self._path
                header = None if source is file else file.header
                return adapter.load(
                    source, names=names, device=self._device, header=header, mmap=self._mmap
                )
            if framework == "flax":
                from .. import jax

                return jax.load(file, names=names)
            from .. import numpy

            arrays = numpy.load(file, names=names)
        except HeaderError as error:
            raise as_reference_error(error, "reading tensors") from None
        if framework == "np":
            return arrays
        convert = self._converter()
        return {name: convert(array) for name, array in arrays.items()}

    def _converter(self) -> Callable[[Any], Any]:
        """The function that makes the framework's tensor of a numpy array (tf, mlx,
        paddle)."""
        module, function = _CONVERTERS[self._framework]
        make = getattr(import_module(module), function)
        if self._framework != "paddle":
            return make  # type: ignore[no-any-return]
        place = self._device
        if isinstance(place, str) and place.startswith("cuda:"):
            place = "gpu:" + place.removeprefix("cuda:")
        return lambda array: make(array, place=place)

    def get_slice(self, name: str) -> SafeSlice:
        """A handle on tensor `name` that reads only what is indexed: ``get_slice(name)[:,
        :8]``; ``get_shape()`` and ``get_dtype()`` read nothing."""
        info = self._info(name)
        file = self._opened()
        framework = self._framework
        if framework == "pt":
            from .. import torch as adapter

            tensor = adapter.open_tensors(file, device=self._device)[name]
            return TorchSlice(info, tensor) if self._mmap else SafeSlice(info, tensor)
        if framework == "flax":
            from .. import jax

            return SafeSlice(info, jax.open_tensors(file)[name])
        from .. import numpy

        lazy = numpy.open_tensors(file)[name]
        if framework == "np":
            return SafeSlice(info, lazy)
        if framework == "paddle" and self._mmap:
            return TorchSlice(info, lazy, self._converter())
        return SafeSlice(info, lazy, self._converter())

    def __enter__(self) -> safe_open:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._file = None

    def __repr__(self) -> str:
        if self._file is None:
            return "<safe_open (closed)>"
        return f"<safe_open {self._file.source!r}, framework {_FRAMEWORK_NAMES[self._framework]!r}>"


def safe_open_handle(
    f: Any, framework: str, device: Any = "cpu", *, backend: str = "mmap"
) -> safe_open:
    """The reference's ``_safe_open_handle``: `safe_open` of an open file: a file with a
    name is opened again by that name, as the reference does (so a file opened in text mode
    works too); beyond it, a binary file object without a name is read as it is."""
    name = getattr(f, "name", None)
    if hasattr(f, "fileno") and isinstance(name, (str, os.PathLike)):
        return safe_open(name, framework, device, backend=backend)
    return safe_open(f, framework, device, backend=backend)


class SafeSlice:
    """One tensor of a `safe_open` file, not read yet (the reference's ``PySafeSlice``), of
    numpy and the other frameworks, or of ``backend="pread"`` (torch's with the default
    backend is a `TorchSlice`).

    Indexing reads only the selection's bytes. Keys as the reference takes them: ints
    (negative from the end), slices, a tuple of those, ``()``, and ``[]`` (an empty
    selection of the first dimension), with the reference's errors for an index out of range
    or a non-empty list; beyond it, a slice's step is honoured (the reference ignores it,
    and returns the wrong elements), and ``...`` and negative slice bounds read as numpy
    reads them.
    """

    __slots__ = ("_convert", "_info", "_tensor")

    def __init__(
        self, info: TensorInfo, tensor: Any, convert: Callable[[Any], Any] | None = None
    ) -> None:
        self._info = info
        self._tensor = tensor
        self._convert = convert

    def get_shape(self) -> list[int]:
        """The whole tensor's shape (as the header says it)."""
        return list(self._info.shape)

    def get_dtype(self) -> str:
        """The tensor's safetensors dtype: ``"F32"``, ``"BF16"``..."""
        return self._info.dtype

    def __getitem__(self, key: object) -> Any:
        with reference_errors("reading a slice"):
            selection = self._tensor[reference_key(key, self._info.shape)]
        return selection if self._convert is None else self._convert(selection)

    def __repr__(self) -> str:
        return f"<SafeSlice {self._info.name!r} {self._info.dtype} {list(self._info.shape)}>"


class TorchSlice(SafeSlice):
    """A `SafeSlice` of ``framework="pt"`` or ``"paddle"`` with the default backend
    (``"mmap"``), indexed as the framework indexes a tensor, since the reference indexes a
    view of its map there: a slice's bounds are clamped to the shape (the last rank of an
    uneven tensor-parallel split reads ``[8:12]`` of 10 rows), ``None`` adds a dimension,
    bools, lists and tensors index as in the framework, and what it refuses raises its error
    (torch's before anything is read: IndexError for an index out of range, ValueError for
    a negative step).

    Ints, slices of a positive step, ``...`` and ``None`` read only the selection's bytes;
    another key (a list, a tensor, a bool) reads the whole tensor, then indexes it.
    """

    __slots__ = ()

    def __getitem__(self, key: object) -> Any:
        if self._convert is None:  # torch: its refusals, in its words, before any read
            import torch

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # said once below, where the key is applied
                meta: Any = torch.empty(self._tensor.shape, device="meta")  # shape, no data
                meta[key]
        basic = _basic_key(key, tuple(self._tensor.shape))
        with reference_errors("reading a slice"):
            selection = self._tensor[... if basic is None else basic[0]]
        if self._convert is not None:
            selection = self._convert(selection)
        if basic is None:
            return selection[key]
        return selection if basic[1] is None else selection[basic[1]]


def _basic_key(key: object, shape: tuple[int, ...]) -> tuple[tuple[object, ...], object] | None:
    """A key of ints (in range), slices (of a positive step), at most one ``...`` and
    ``None``, as ``(what to read, what to index the read tensor with after)``: the read has
    each slice clamped to its dimension as torch and numpy clamp it, and neither ``...`` nor
    ``None`` (``after`` adds the ``None`` dimensions, or is None). None for another key, or
    one the framework refuses (which indexing the whole tensor raises)."""
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(item is Ellipsis for item in items) > 1 or not all(map(_is_basic, items)):
        return None
    indexing = [item for item in items if item is not None and item is not Ellipsis]
    if len(indexing) > len(shape):
        return None
    read: list[object] = []
    after: list[object] = []
    for item in items:
        if item is Ellipsis:
            count = len(shape) - len(indexing)
            read.extend([slice(None)] * count)
            after.extend([slice(None)] * count)
        elif item is None:
            after.append(None)
        elif isinstance(item, slice):
            start, stop, step = item.indices(shape[len(read)])
            if step <= 0:
                return None
            read.append(slice(start, max(start, stop), step))
            after.append(slice(None))
        else:
            index, size = operator.index(item), shape[len(read)]  # type: ignore[arg-type]
            if not -size <= index < size:
                return None
            read.append(index + size if index < 0 else index)
    return tuple(read), (tuple(after) if None in after else None)


def _is_basic(item: object) -> bool:
    """Whether `item` is an int (not a bool), ``None``, ``...`` or a slice of int bounds and
    positive step."""
    if isinstance(item, slice):
        bounds = (item.start, item.stop, item.step)
        return all(bound is None or _is_int(bound) for bound in bounds)
    return item is None or item is Ellipsis or _is_int(item)


def _is_int(item: object) -> bool:
    return isinstance(item, numbers.Integral) and not isinstance(item, bool)


def reference_key(key: object, shape: tuple[int, ...]) -> object:
    """`key` checked as the reference checks a slice's key (its errors, its words), as the
    key numpy's basic indexing reads the same selection with."""
    if isinstance(key, list):
        if key:
            raise SafetensorError("Non empty lists are not implemented")
        items: list[object] = [slice(0, 0)]
    elif isinstance(key, tuple):
        items = list(key)
    else:
        items = [key]
    if any(item is Ellipsis or item is None for item in items):
        return tuple(items)  # numpy's reading (the reference has none)
    shown: list[str] = []
    spans: list[tuple[int, int] | None] = []  # (start, stop) to check; None: nothing to
    resolved: list[object] = []
    for dim, item in enumerate(items):
        size = shape[dim] if dim < len(shape) else 0
        if isinstance(item, slice):
            start, stop = _bound(item.start, size), _bound(item.stop, size)
            shown.append(f"{'' if start is None else start}:{'' if stop is None else stop}")
            step = 1 if item.step is None else operator.index(item.step)
            if step < 0 or (start is None and stop is None):
                spans.append(None)  # read as numpy reads it
            else:
                spans.append((start or 0, size if stop is None else stop))
            resolved.append(slice(start, stop, item.step))
            continue
        index = operator.index(item)  # type: ignore[arg-type]  # TypeError for others
        if index < 0:
            if index + size < 0:
                raise SafetensorError(f"Invalid index {index} for dimension {dim} of size {size}")
            index += size
        shown.append(str(index))
        spans.append((index, index + 1))
        resolved.append(index)
    where = f"Error during slicing [{', '.join(shown)}] with shape {list(shape)}"
    if len(items) > len(shape):
        raise SafetensorError(f"{where}: more slicing indexes than dimensions in tensor")
    # The reference checks the last dimension first, and says the first fault it meets.
    for dim in reversed(range(len(spans))):
        span = spans[dim]
        if span is None:
            continue
        start, stop = span
        size = shape[dim]
        if start >= size or stop > size:
            asked = start if start >= size else stop - 1
            raise SafetensorError(
                f"{where}: index {asked} out of bounds for tensor dimension #{dim} of size {size}"
            )
    return tuple(resolved)


def _bound(value: object, size: int) -> int | None:
    """A slice's bound: None, or an index (a negative one counted from the end, as numpy)."""
    if value is None:
        return None
    index = operator.index(value)  # type: ignore[arg-type]
    return max(index + size, 0) if index < 0 else index
