"""Awkward Array's safetensors files, read from anywhere (lazily) and written without safetensors.

Layer: adapters (on the data path and the writer).

    >>> import awkward as ak
    >>> from safetensors_header.awkward import from_safetensors, to_safetensors
    >>> to_safetensors(ak.Array([[1, 2, 3], [], [4]]), "jagged.safetensors")  # doctest: +SKIP
    >>> from_safetensors("https://host/jagged.safetensors", virtual=True)  # doctest: +SKIP
    <Array [??, ??, ??] type='3 * var * int64'>

The files are those of ``ak.to_safetensors`` and ``ak.from_safetensors`` (awkward 2.8.10 and
later): the array is packed (``ak.to_packed``) and cut into buffers (``ak.to_buffers``); each
buffer is a 1-d tensor named by ``buffer_key`` (by default ``"{form_key}-{attribute}"``:
``node0-offsets``, ``node1-data``, ...), and ``__metadata__`` holds ``form`` (the form, as
JSON) and ``length``.

What this module adds to awkward's two functions:

* **Sources.** `from_safetensors` reads whatever `read_header` reads: a path, bytes, a binary
  file object (a stream too), an ``http(s)://`` URL, an fsspec URL (``s3://``, ``memory://``,
  ...) or a ``(store, path)`` pair (an obstore store or an fsspec filesystem): the header, then
  only the buffers the form needs, in as few requests as `read_ranges` needs.
* **Laziness.** With ``virtual=True`` only the header is read; each buffer is one ranged read,
  made when awkward first needs it (a field computed with, a slice printed), then kept.
* **Files that describe themselves.** `to_safetensors` records a ``buffer_key`` other than the
  default (and ``byteorder=">"``) in ``__metadata__``, so that the file reads back without them
  being passed again; for files that do not record it, the key is worked out from the form
  keys and the tensor names.
* **Every dtype awkward has, but the long doubles.** The ``safetensors`` package (which this
  module does not need) refuses complex128, datetime64 and timedelta64 buffers. Here a
  datetime64 or timedelta64 buffer is written as an ``I64`` tensor of the same bytes, and a
  complex128 one as an ``F64`` tensor of shape ``[n, 2]`` (real and imaginary parts); the form
  keeps the real dtype, so both this module and ``ak.from_safetensors`` read them back as they
  were. float128 and complex256, whose layout depends on the platform, are refused.
* **Errors.** A file that holds no awkward array (no ``form`` or ``length`` in its metadata, a
  form that does not parse, a buffer the form needs missing, too short for the form, or not a
  whole number of its values) raises `AwkwardFileError` saying what is wrong; before any
  buffer is read when the header alone shows it.

Needs awkward (2.8.10 or later) and numpy: ``pip install 'safetensors_header[awkward]'``.
Importing this module imports both.
"""

from __future__ import annotations

import sys

from ._extras import optional_imports

with optional_imports("awkward", "safetensors_header.awkward"):
    import awkward as ak  # type: ignore[import-untyped]  # awkward ships no type information
    import numpy as np

from ._awkward_forms import (
    BUFFER_KEY,
    BYTEORDER,
    FORM,
    LENGTH,
    AwkwardFileError,
    Cache,
    Plan,
    form_and_length,
    index_guards,
    recorded_byteorder,
    walk_form,
)
from ._awkward_keys import DEFAULT_BUFFER_KEY, resolved_key
from ._core.fileformat import MAX_HEADER_SIZE
from ._core.parse import parse_header
from ._encode import NUMPY_KINDS, encode_header
from ._errors import HeaderError
from ._fetch import opened
from ._sources import Source
from ._sources.options import Options
from ._writer import write_pieces

__all__ = ["DEFAULT_BUFFER_KEY", "AwkwardFileError", "from_safetensors", "to_safetensors"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping
    from typing import Any, BinaryIO, Final, Literal, TypeAlias

    from _typeshed import StrPath
    from numpy.typing import NDArray
    from typing_extensions import Unpack

    from ._awkward_keys import BufferKey
    from ._core.header import Header
    from ._sources.transport import Transport

    #: Where `to_safetensors` writes: a local path, an fsspec URL, a ``(store, path)`` pair or
    #: a writable binary file object.
    Destination: TypeAlias = StrPath | tuple[Any, str] | BinaryIO
    _Tensor: TypeAlias = tuple[str, tuple[int, ...], "NDArray[Any]"]

_NATIVE: Final = "<" if sys.byteorder == "little" else ">"
# (numpy kind, item size) -> the safetensors dtype of a buffer of that dtype: the names the
# reference gives (the writer's table), and int64 for datetime64 and timedelta64 ("M", "m"),
# which it refuses.
_TENSOR_DTYPES: Final = {**NUMPY_KINDS, ("M", 8): "I64", ("m", 8): "I64"}


# storage_options is named as awkward's own from_safetensors names it (in its place): Python
# binds it there, so it never reaches **transport, whose type also lists it.
def from_safetensors(  # type: ignore[misc]
    source: Source,
    *,
    storage_options: Mapping[str, Any] | None = None,
    virtual: bool = False,
    buffer_key: BufferKey | None = None,
    backend: str = "cpu",
    byteorder: Literal["<", ">"] | None = None,
    allow_noncanonical_form: bool = False,
    highlevel: bool = True,
    behavior: Mapping[Any, Any] | None = None,
    attrs: Mapping[str, Any] | None = None,
    header: Header | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    **transport: Unpack[Transport],
) -> Any:
    """Read an awkward array from a safetensors file, as ``ak.from_safetensors`` does.

    The keywords are ``ak.from_safetensors``' with its defaults, but for `buffer_key` and
    `byteorder`, whose default ``None`` means "the file's own"; `header`, `max_header_size`
    and the transport options but ``storage_options`` (which awkward has) are this
    library's.

    Args:
        source: What `read_header` reads: a local path, a bytes-like object holding the
            file, a binary file object (a stream that cannot seek too, but not with
            `virtual`), an ``http(s)://`` URL, an ``hf://`` path, an fsspec URL
            (``s3://``, ``gs://``, ``memory://``, ...) or a ``(store, path)`` pair (an
            obstore store or an fsspec filesystem). The header is read, then only the
            tensors the form needs.
        virtual: Read nothing but the header now: each buffer becomes a virtual buffer of
            the array, read with one ranged read when awkward first needs it, and kept.
            Otherwise every buffer is read now, in as few requests as `read_ranges` needs
            (for a URL, one per part of a long read: `Transport`'s ``part_size``).
        buffer_key: The tensors' names, as for ``ak.from_buffers``: a template of
            ``{form_key}`` and ``{attribute}``, or a function of the keywords ``form_key``,
            ``attribute`` and ``form``. ``None``: the ``buffer_key`` the file records (see
            `to_safetensors`), else awkward's default ``"{form_key}-{attribute}"`` if it names
            every buffer, else the one template of ``{form_key}`` and ``{attribute}`` that the
            tensor names follow.
        byteorder: How the buffers' numbers are stored: ``"<"`` (little-endian, as safetensors
            requires) or ``">"``. ``None``: the ``byteorder`` the file records, else ``"<"``.
        backend, allow_noncanonical_form, highlevel, behavior, attrs: As for
            ``ak.from_buffers``.
        header: The file's header, already read (it is not read again); it must be this
            file's.
        max_header_size: The largest header length accepted; see `parse_header`.
        **transport: How a URL or an object store is reached (`Transport`):
            ``storage_options`` for fsspec URLs, as awkward takes them; ``timeout`` bounds
            each read of buffers (none by default; the header's read has its own, 10 s
            unless this is given).

    Returns:
        An ``ak.Array``, or with ``highlevel=False`` its layout.

    Raises:
        AwkwardFileError: The file holds no awkward array (see the module's docstring), or
            one whose index buffers point outside their contents (offsets that go back or
            below 0, a start past its stop, an index or a tag beyond its content, an index
            type awkward does not take): every index buffer is checked before awkward sees
            it. With ``virtual=True`` that check, and the sizes that depend on other
            buffers' values (a list's content, on its offsets), come when the buffer is
            first read (from awkward's reading of the array).
        TypeError: A form that is not canonical, without ``allow_noncanonical_form=True``
            (awkward's own error).
        HeaderError: The file is not valid safetensors (as for `read_header`), or a stream
            ended before its data did.
        RemoteError: For URLs and object stores, as for `read_ranges`.
        ValueError: `byteorder` is not one of the three; ``virtual=True`` with a stream.
    """
    if byteorder not in (None, "<", ">"):
        raise ValueError(f"byteorder must be '<', '>' or None, not {byteorder!r}")
    options = Options.given(
        "from_safetensors", transport, timeout=None, storage_options=storage_options
    )
    file = opened(source, options, header=header, max_header_size=max_header_size)
    header = file.header
    stream = header.file_size is None  # read_header could not seek: a pipe, a socket...
    if virtual and stream:
        raise ValueError(
            "virtual=True reads each buffer at its offset when it is needed, which a stream "
            "cannot do: read it with virtual=False, or pass a path, a URL or the bytes"
        )
    metadata = dict(header.metadata or {})
    form, length = form_and_length(metadata)
    order = recorded_byteorder(metadata) if byteorder is None else byteorder
    needed: list[tuple[Any, str]] = []
    walk_form(form, length, lambda node, attribute, _, __: needed.append((node, attribute)))
    plan = Plan(header, *resolved_key(buffer_key, metadata, needed, header), order)
    walk_form(form, length, plan.check)  # names and sizes the header settles, before any read
    if virtual:
        # Each buffer read when awkward first needs it, and its indexes checked then
        # against what the header says its contents can hold.
        cache = Cache(file, plan, options.timeout)
        guards = index_guards(form, plan)
        container: Mapping[str, Any] = {
            key: _reader(key, cache, guards.get(key)) for key in plan.entries
        }
    else:
        infos = [info for info, _ in plan.entries.values()]
        # (A stream is read in order, from where its header ended.)
        pieces = list(file.read_tensors(infos, timeout=options.timeout).values())
        plan.data = {
            key: np.frombuffer(piece, dtype=dtype.newbyteorder(order))
            for (key, (_, dtype)), piece in zip(plan.entries.items(), pieces, strict=True)
        }
        walk_form(form, length, plan.check)  # every size, now that offsets and indexes are read
        container = plan.trimmed
    getkey = plan.getkey
    passed_on = {  # awkward's own keywords, as they came
        "backend": backend,
        "allow_noncanonical_form": allow_noncanonical_form,
        "highlevel": highlevel,
        "behavior": behavior,
        "attrs": attrs,
    }

    def build(**changed: Any) -> Any:
        return ak.from_buffers(
            form,
            length,
            container,
            buffer_key=lambda form_key, attribute, form: getkey(form, attribute),
            # The buffers are in the machine's order already: awkward 2.8 ignores byteorder
            # for arrays (it swaps only raw bytes).
            byteorder=_NATIVE,
            **{**passed_on, **changed},
        )

    try:
        return build()
    except (AwkwardFileError, HeaderError, OSError):
        raise
    except TypeError as error:
        # A form that is not canonical is awkward's TypeError, as awkward gives it: reading
        # it anyway (allow_noncanonical_form) is the caller's choice. A form awkward cannot
        # build even so is the file's fault.
        if not allow_noncanonical_form:
            try:
                build(allow_noncanonical_form=True)
            except Exception:
                pass
            else:
                raise
        raise AwkwardFileError(
            f"awkward cannot build the array the file describes: {type(error).__name__}: "
            f"{str(error)[:300]}"
        ) from error
    except (ValueError, IndexError, KeyError, AssertionError) as error:
        # The checks above leave awkward nothing to refuse in a file; a form it cannot
        # build from buffers of the right sizes is still the file's fault, not a crash.
        # (Its TypeError for a form that is not canonical passes: allow_noncanonical_form
        # is the caller's to give.)
        raise AwkwardFileError(
            f"awkward cannot build the array the file describes: {type(error).__name__}: "
            f"{str(error)[:300]}"
        ) from error


def to_safetensors(
    array: Any,
    destination: Destination,
    *,
    storage_options: Mapping[str, Any] | None = None,
    container: MutableMapping[str, Any] | None = None,
    buffer_key: BufferKey = DEFAULT_BUFFER_KEY,
    form_key: str = "node{id}",
    id_start: int = 0,
    backend: str | None = None,
    byteorder: Literal["<", ">"] = "<",
) -> Header:
    """Write an awkward array to a safetensors file, as ``ak.to_safetensors`` does.

    The file is byte for byte ``ak.to_safetensors``' for the same arguments (but for the
    order of the two metadata keys, which the reference writes in a random order: here
    ``form`` comes first), written by this library's writer: the ``safetensors`` package is
    not needed. Besides, it records in ``__metadata__`` what `from_safetensors` needs to read
    it back by itself: a ``buffer_key`` template other than the default, and
    ``byteorder=">"``; and it writes the buffers that package refuses: datetime64 and
    timedelta64 as ``I64`` tensors, complex128 as ``F64`` tensors of shape ``[n, 2]``.

    Args:
        array: Anything ``ak.to_layout`` takes but a scalar or an ``ak.Record``.
        destination: A local path (written to a temporary file in the same directory, then
            renamed over it: see `write_file`), an fsspec URL (``s3://``, ``memory://``,
            ...), a ``(store, path)`` pair (an obstore store or an fsspec filesystem), or a
            writable binary file object (written from its current position).
        storage_options: For fsspec URLs: passed to ``fsspec.core.url_to_fs``.
        container, buffer_key, form_key, id_start, backend: As for ``ak.to_buffers``;
            `container` receives the buffers. A `buffer_key` function cannot be recorded:
            `from_safetensors` then works the key out from the tensor names.
        byteorder: ``"<"`` (little-endian, as safetensors requires, and the default here
            on every machine; awkward's is the machine's own), or ``">"`` (what awkward
            writes, then recorded in the metadata).

    Returns:
        The file's `Header`, as `read_header` would return it.

    Raises:
        TypeError: `array` is a scalar or an ``ak.Record`` (as for awkward), or holds
            float128 or complex256 values, which no safetensors dtype can carry.
        ValueError: `byteorder` is neither ``"<"`` nor ``">"``; `destination` is an
            http(s) URL.
        HeaderError: The header would not be valid (above 100 MB, say); nothing is written.
        OSError: The file could not be written.
    """
    if byteorder not in ("<", ">"):
        raise ValueError(f"byteorder must be '<' or '>', not {byteorder!r}")
    layout = ak.to_layout(array, allow_record=True, primitive_policy="error")
    packed = ak.to_packed(layout, highlevel=False)
    form, length, buffers = ak.to_buffers(
        packed,
        container,
        buffer_key,
        form_key,
        id_start=id_start,
        backend=backend,
        byteorder=byteorder,
    )
    metadata = {FORM: form.to_json(), LENGTH: str(length)}
    if isinstance(buffer_key, str) and buffer_key != DEFAULT_BUFFER_KEY:
        metadata[BUFFER_KEY] = buffer_key
    if byteorder == ">":
        metadata[BYTEORDER] = byteorder
    tensors = {name: _as_tensor(name, buffer) for name, buffer in buffers.items()}
    return _write(destination, tensors, metadata, storage_options)


# --- reading -------------------------------------------------------------------------------


def _reader(
    key: str, cache: Cache, guard: Callable[[Cache], None] | None
) -> Callable[[], NDArray[Any]]:
    """A virtual buffer's generator: its tensor, read once; its indexes checked first."""

    def read() -> NDArray[Any]:
        values = cache.load(key)
        if guard is not None:
            guard(cache)
        return values

    return read


# --- writing -------------------------------------------------------------------------------


def _as_tensor(name: str, buffer: Any) -> _Tensor:
    """The safetensors dtype, shape and C-contiguous data of one of awkward's buffers."""
    data = np.ascontiguousarray(buffer)
    kind, size = data.dtype.kind, data.dtype.itemsize
    if (kind, size) == ("c", 16):  # complex128: no safetensors dtype, so its float64 pairs
        return "F64", (*data.shape, 2), data.view(np.float64)
    dtype = _TENSOR_DTYPES.get((kind, size))
    if dtype is None:
        raise TypeError(
            f"buffer {name!r} holds {data.dtype} values, which no safetensors dtype can carry "
            "(float128 and complex256 have a layout of their platform's)"
        )
    if kind in "Mm":  # datetime64, timedelta64: the int64 counts of their unit
        data = data.view(np.int64)
    return dtype, data.shape, data


def _write(
    destination: Destination,
    tensors: Mapping[str, _Tensor],
    metadata: Mapping[str, str],
    storage_options: Mapping[str, Any] | None,
) -> Header:
    header, pieces = _pieces(tensors, metadata)
    write_pieces(destination, pieces, storage_options=storage_options)  # the writer's sink
    return header


def _pieces(
    tensors: Mapping[str, _Tensor], metadata: Mapping[str, str]
) -> tuple[Header, list[bytes | memoryview]]:
    """The file's header, and its bytes in order: the header's, then each tensor's."""
    encoded = encode_header(
        {name: (dtype, shape) for name, (dtype, shape, _) in tensors.items()},
        metadata=metadata,
    )
    size = len(encoded) + sum(data.nbytes for _, _, data in tensors.values())
    header = parse_header(encoded, file_size=size)
    pieces: list[bytes | memoryview] = [encoded]
    # Flat byte views, as a file's write() takes them (memoryview.cast cannot flatten complex).
    pieces += [tensors[name][2].view(np.uint8).reshape(-1).data for name in header.tensors]
    return header, pieces
