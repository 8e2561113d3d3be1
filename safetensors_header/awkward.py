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

import math
import os
import string
import sys

from ._extras import missing

try:
    import awkward as ak  # type: ignore[import-untyped]  # awkward ships no type information
    import numpy as np
except ModuleNotFoundError as error:
    raise missing(error, "awkward", "safetensors_header.awkward") from None

from . import _replace
from ._encode import NUMPY_KINDS, encode_header
from ._errors import HeaderError
from ._fetch import SafetensorsFile, opened
from ._format import MAX_HEADER_SIZE
from ._parser import parse_header
from ._sources import Source, backend_of
from ._sources.options import Options
from ._writer import write_file

__all__ = ["DEFAULT_BUFFER_KEY", "AwkwardFileError", "from_safetensors", "to_safetensors"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
    from typing import Any, BinaryIO, Final, Literal, TypeAlias

    from _typeshed import StrPath
    from numpy.typing import NDArray
    from typing_extensions import Unpack

    from ._header import Header, TensorInfo
    from ._sources.transport import Transport

    #: A ``buffer_key`` as awkward takes it: a template of ``{form_key}`` and ``{attribute}``,
    #: or a function of the keywords ``form_key``, ``attribute`` and ``form``.
    BufferKey: TypeAlias = str | Callable[..., str]
    #: Where `to_safetensors` writes: a local path, an fsspec URL, a ``(store, path)`` pair or
    #: a writable binary file object.
    Destination: TypeAlias = StrPath | tuple[Any, str] | BinaryIO
    _GetKey: TypeAlias = Callable[[Any, str], str]
    _Visit: TypeAlias = Callable[[Any, str, "np.dtype[Any]", "int | None"], "NDArray[Any] | None"]
    _Tensor: TypeAlias = tuple[str, tuple[int, ...], "NDArray[Any]"]
    _Order: TypeAlias = Literal["<", ">"]

#: awkward's default ``buffer_key`` (of ``ak.to_buffers`` and ``ak.to_safetensors``).
DEFAULT_BUFFER_KEY: Final = "{form_key}-{attribute}"
# The keys of __metadata__: awkward's two, and the two this module writes when needed.
_FORM: Final = "form"
_LENGTH: Final = "length"
_BUFFER_KEY: Final = "buffer_key"
_BYTEORDER: Final = "byteorder"
_NATIVE: Final = "<" if sys.byteorder == "little" else ">"
_FIELDS: Final = frozenset({"form_key", "attribute"})
_MAX_LENGTH_DIGITS: Final = 20  # 2^64 has 20 digits; int() of a longer text is only slow
_SHOWN_NAMES: Final = 6  # tensor names an error message lists
_SHOWN_TEMPLATE: Final = 80  # characters of a buffer_key template an error message shows
# Places of a form key (and of an attribute) in a tensor name tried when inferring the
# buffer_key: awkward's names hold each once; more is a hostile or a very odd name.
_MAX_OCCURRENCES: Final = 8
# The dtypes of awkward's index buffers (offsets, starts, stops, index, tags, masks).
_INDEX_DTYPES: Final[dict[str, np.dtype[Any]]] = {
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "i32": np.dtype(np.int32),
    "u32": np.dtype(np.uint32),
    "i64": np.dtype(np.int64),
}
# (numpy kind, item size) -> the safetensors dtype of a buffer of that dtype: the names the
# reference gives (the writer's table), and int64 for datetime64 and timedelta64 ("M", "m"),
# which it refuses.
_TENSOR_DTYPES: Final = {**NUMPY_KINDS, ("M", 8): "I64", ("m", 8): "I64"}


class AwkwardFileError(ValueError):
    """A valid safetensors file, but one that holds no awkward array (or not all of one).

    Attributes:
        buffer: The tensor at fault (missing, too short, ...), where there is one, else
            ``None``.

    The message says what the form needs and what the file has. A file that is not valid
    safetensors raises the library's `HeaderError` instead.
    """

    def __init__(self, message: str, *, buffer: str | None = None) -> None:
        super().__init__(message)
        self.buffer = buffer


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
    form, length = _form_and_length(metadata)
    order = _byteorder(metadata) if byteorder is None else byteorder
    needed: list[tuple[Any, str]] = []
    _walk_form(form, length, lambda node, attribute, _, __: needed.append((node, attribute)))
    plan = _Plan(header, *_resolved_key(buffer_key, metadata, needed, header), order)
    _walk_form(form, length, plan.check)  # names and sizes the header settles, before any read
    if virtual:
        # Each buffer read when awkward first needs it, and its indexes checked then
        # against what the header says its contents can hold.
        cache = _Cache(file, plan, options.timeout)
        guards = _guards(form, plan)
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
        _walk_form(form, length, plan.check)  # every size, now that offsets and indexes are read
        container = plan.trimmed
    getkey = plan.getkey
    passed_on = {  # awkward's own keywords, as they came
        "backend": backend,
        "allow_noncanonical_form": allow_noncanonical_form,
        "highlevel": highlevel,
        "behavior": behavior,
        "attrs": attrs,
    }
    try:
        return ak.from_buffers(
            form,
            length,
            container,
            buffer_key=lambda form_key, attribute, form: getkey(form, attribute),
            # The buffers are in the machine's order already: awkward 2.8 ignores byteorder
            # for arrays (it swaps only raw bytes).
            byteorder=_NATIVE,
            **passed_on,
        )
    except (AwkwardFileError, HeaderError, OSError):
        raise
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
        container=container,
        buffer_key=buffer_key,
        form_key=form_key,
        id_start=id_start,
        backend=backend,
        byteorder=byteorder,
    )
    metadata = {_FORM: form.to_json(), _LENGTH: str(length)}
    if isinstance(buffer_key, str) and buffer_key != DEFAULT_BUFFER_KEY:
        metadata[_BUFFER_KEY] = buffer_key
    if byteorder == ">":
        metadata[_BYTEORDER] = byteorder
    tensors = {name: _as_tensor(name, buffer) for name, buffer in buffers.items()}
    return _write(destination, tensors, metadata, storage_options)


# --- reading -------------------------------------------------------------------------------


def _form_and_length(metadata: Mapping[str, str]) -> tuple[Any, int]:
    missing = [key for key in (_FORM, _LENGTH) if key not in metadata]
    if missing:
        has = f"its keys are {', '.join(map(repr, metadata))}" if metadata else "it has none"
        raise AwkwardFileError(
            f"not a file of an awkward array: its __metadata__ has no "
            f"{' and no '.join(map(repr, missing))} ({has}); ak.to_safetensors and "
            "to_safetensors write both"
        )
    try:
        form = ak.forms.from_json(metadata[_FORM])
    except Exception as error:  # json, KeyError, TypeError, ValueError...: all mean the same
        raise AwkwardFileError(
            f"the metadata's form is not an awkward form: {type(error).__name__}: {error}"[:300]
        ) from None
    text = metadata[_LENGTH]
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_LENGTH_DIGITS):
        raise AwkwardFileError(
            f"the metadata's length must be a non-negative integer, not {text[:40]!r}"
        )
    return form, int(text)


def _byteorder(metadata: Mapping[str, str]) -> Literal["<", ">"]:
    recorded = metadata.get(_BYTEORDER, "<")
    if recorded == "<":
        return "<"
    if recorded == ">":
        return ">"
    raise AwkwardFileError(f"the metadata's byteorder must be '<' or '>', not {recorded[:40]!r}")


def _walk_form(form: Any, length: int | None, visit: _Visit) -> None:
    """Visit every buffer `form` needs, with its count when known, as ak.from_buffers reads them.

    `visit` gets the form node, the attribute, the dtype and the number of values the node
    needs (``None`` when it depends on buffers not read), and returns the buffer's values
    if they are read, so that the counts of the node's contents follow from them. The
    counts are ak.from_buffers' (``_reconstitute``).
    """
    forms = ak.forms
    if isinstance(form, forms.EmptyForm):
        if length:
            raise AwkwardFileError(f"the form is an EmptyArray, but the length is {length}")
    elif isinstance(form, forms.NumpyForm):
        dtype = ak.types.numpytype.primitive_to_dtype(form.primitive)
        count = None if length is None else length * math.prod(form.inner_shape)
        visit(form, "data", dtype, count)
    elif isinstance(form, forms.UnmaskedForm):
        _walk_form(form.content, length, visit)
    elif isinstance(form, forms.BitMaskedForm):
        mask = _index_dtype(form, "mask", form.mask)
        visit(form, "mask", mask, None if length is None else -(-length // 8))
        _walk_form(form.content, length, visit)
    elif isinstance(form, forms.ByteMaskedForm):
        visit(form, "mask", _index_dtype(form, "mask", form.mask), length)
        _walk_form(form.content, length, visit)
    elif isinstance(form, (forms.IndexedOptionForm, forms.IndexedForm)):
        index = visit(form, "index", _index_dtype(form, "index", form.index), length)
        if index is not None:
            _check_index(form, index, None)
        _walk_form(form.content, _past_max(index), visit)
    elif isinstance(form, forms.ListForm):
        starts = visit(form, "starts", _index_dtype(form, "starts", form.starts), length)
        stops = visit(form, "stops", _index_dtype(form, "stops", form.stops), length)
        if starts is not None and stops is not None:
            _check_list(form, starts, stops, None)
        _walk_form(form.content, _list_end(starts, stops), visit)
    elif isinstance(form, forms.ListOffsetForm):
        offsets_dtype = _index_dtype(form, "offsets", form.offsets)
        offsets = visit(form, "offsets", offsets_dtype, _plus_one(length))
        if offsets is not None:
            _check_offsets_buffer(form, offsets, None)
        end = None if offsets is None else int(offsets[-1]) if len(offsets) > 1 else 0
        _walk_form(form.content, end, visit)
    elif isinstance(form, forms.RegularForm):
        _walk_form(form.content, None if length is None else length * form.size, visit)
    elif isinstance(form, forms.RecordForm):
        for content in form.contents:
            _walk_form(content, length, visit)
    elif isinstance(form, forms.UnionForm):
        if not form.contents:
            raise AwkwardFileError("the form has a UnionArray with no contents")
        tags = visit(form, "tags", _index_dtype(form, "tags", form.tags), length)
        index = visit(form, "index", _index_dtype(form, "index", form.index), length)
        if tags is not None and index is not None:
            _check_union(form, tags, index, [None] * len(form.contents))
        for tag, content in enumerate(form.contents):
            selected = None if tags is None or index is None else index[tags == tag]
            _walk_form(content, _past_max(selected), visit)
    else:
        raise AwkwardFileError(f"the form has a node of an unknown class: {type(form).__name__}")


# The index dtypes each node takes (awkward's own constraints, which its forms do not check).
_INDEX_KINDS: Final = {
    ("ListOffsetForm", "offsets"): ("i32", "u32", "i64"),
    ("ListForm", "starts"): ("i32", "u32", "i64"),
    ("ListForm", "stops"): ("i32", "u32", "i64"),
    ("IndexedForm", "index"): ("i32", "u32", "i64"),
    ("IndexedOptionForm", "index"): ("i32", "i64"),
    ("ByteMaskedForm", "mask"): ("i8",),
    ("BitMaskedForm", "mask"): ("u8",),
    ("UnionForm", "tags"): ("i8",),
    ("UnionForm", "index"): ("i32", "u32", "i64"),
}


def _index_dtype(form: Any, attribute: str, name: str) -> np.dtype[Any]:
    """The numpy dtype of an index buffer, if the node takes one of that type."""
    allowed = _INDEX_KINDS[type(form).__name__, attribute]
    if name not in allowed:
        raise AwkwardFileError(
            f"the form's {type(form).__name__} node {_shown_key(form.form_key)} has {attribute} of "
            f"type {_shown_key(name)}; awkward takes {', '.join(map(repr, allowed))}"
        )
    return _INDEX_DTYPES[name]


def _shown_key(text: object) -> str:
    """A name from a file, for a message: its repr, cut to `_SHOWN_TEMPLATE` characters."""
    shown = repr(text)
    return shown if len(shown) <= _SHOWN_TEMPLATE else shown[:_SHOWN_TEMPLATE] + "..."


def _out_of_bounds(form: Any, attribute: str, problem: str) -> AwkwardFileError:
    return AwkwardFileError(
        f"the {attribute} of the form's {type(form).__name__} node {_shown_key(form.form_key)} "
        f"{problem}: "
        "awkward would read outside its content",
    )


def _check_offsets_buffer(form: Any, offsets: NDArray[Any], bound: int | None) -> None:
    """Offsets from 0 up, never going back, and (with a `bound`) within the content."""
    if not len(offsets):
        return
    if offsets[0] < 0:
        raise _out_of_bounds(form, "offsets", f"start at {int(offsets[0])}, below 0")
    if len(offsets) > 1 and bool(np.any(offsets[1:] < offsets[:-1])):
        at = int(np.argmax(offsets[1:] < offsets[:-1]))
        raise _out_of_bounds(
            form, "offsets", f"go back, from {int(offsets[at])} to {int(offsets[at + 1])}"
        )
    if bound is not None and int(offsets[-1]) > bound:
        raise _out_of_bounds(form, "offsets", f"end at {int(offsets[-1])}, past {bound} values")


def _check_list(form: Any, starts: NDArray[Any], stops: NDArray[Any], bound: int | None) -> None:
    """Every non-empty list from a start at 0 or more to a stop no smaller (within `bound`)."""
    count = min(len(starts), len(stops))
    starts, stops = starts[:count], stops[:count]
    used = starts != stops
    if bool(np.any(starts[used] > stops[used])):
        raise _out_of_bounds(form, "starts", "pass their stops")
    if bool(np.any(starts[used] < 0)):
        raise _out_of_bounds(form, "starts", "go below 0")
    if bound is not None and bool(np.any(stops[used] > bound)):
        raise _out_of_bounds(form, "stops", f"go past {bound} values")


def _check_index(form: Any, index: NDArray[Any], bound: int | None) -> None:
    """An index of 0 or more (or, of an option, negative for None), below `bound`."""
    if not isinstance(form, ak.forms.IndexedOptionForm) and bool(np.any(index < 0)):
        raise _out_of_bounds(form, "index", "goes below 0")
    if bound is not None and len(index) and int(index.max()) >= bound:
        raise _out_of_bounds(form, "index", f"goes to {int(index.max())}, past {bound} values")


def _check_union(
    form: Any, tags: NDArray[Any], index: NDArray[Any], bounds: list[int | None]
) -> None:
    """Tags of the contents there are; an index of 0 or more, within each content."""
    count = min(len(tags), len(index))
    tags, index = tags[:count], index[:count]
    if bool(np.any((tags < 0) | (tags >= len(bounds)))):
        raise _out_of_bounds(form, "tags", f"name contents beyond its {len(bounds)}")
    if bool(np.any(index < 0)):
        raise _out_of_bounds(form, "index", "goes below 0")
    for tag, bound in enumerate(bounds):
        chosen = index[tags == tag]
        if bound is not None and len(chosen) and int(chosen.max()) >= bound:
            raise _out_of_bounds(form, "index", f"goes past the {bound} values of content {tag}")


def _past_max(index: NDArray[Any] | None) -> int | None:
    """One more than the largest index (0 for none): how long the content must be."""
    if index is None:
        return None
    return max(0, int(index.max()) + 1) if len(index) else 0


def _list_end(starts: NDArray[Any] | None, stops: NDArray[Any] | None) -> int | None:
    """The largest stop of a non-empty list (0 for none): how long the content must be."""
    if starts is None or stops is None:
        return None
    stops = stops[starts != stops]
    return max(0, int(stops.max())) if len(stops) else 0


def _plus_one(length: int | None) -> int | None:
    return None if length is None else length + 1


def _resolved_key(
    requested: BufferKey | None,
    metadata: Mapping[str, str],
    needed: list[tuple[Any, str]],
    header: Header,
) -> tuple[_GetKey, str]:
    """The tensor name of each buffer, and what to say when one is missing."""
    if requested is not None:
        if callable(requested):
            return _function_key(requested), "the buffer_key function given"
        return _template_key(requested, "buffer_key"), f"buffer_key={_shown_key(requested)}"
    recorded = metadata.get(_BUFFER_KEY)
    if recorded is not None:
        where = "the buffer_key recorded in the metadata"
        return _template_key(
            recorded, where, error=AwkwardFileError
        ), f"{where}, {_shown_key(recorded)}"
    default = _template_key(DEFAULT_BUFFER_KEY, "buffer_key")
    names = header.tensors
    if all(_name(default, node, attribute) in names for node, attribute in needed):
        return default, "the default buffer_key"
    found = _inferred(needed, names)
    if found is None:
        return default, (
            "the default buffer_key, and no other template of {form_key} and {attribute} "
            "names the tensors (pass buffer_key=)"
        )
    return _template_key(found, "buffer_key"), f"the buffer_key the tensor names follow, {found!r}"


def _template_key(template: object, what: str, *, error: type[Exception] = ValueError) -> _GetKey:
    """The names a template gives. One recorded in a file (`error` AwkwardFileError) may hold
    the two fields and nothing else: no format spec or conversion (``{form_key:>1000000000}``
    would make a name of a gigabyte)."""
    if not isinstance(template, str):
        raise TypeError(f"{what} must be a str or a callable, not {type(template).__name__}")
    shown = repr(template[:_SHOWN_TEMPLATE]) + ("..." if len(template) > _SHOWN_TEMPLATE else "")
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as problem:
        raise error(f"{what} {shown} is not a format string: {problem}") from None
    fields = {field for _, field, _, _ in parsed if field is not None}
    if not fields <= _FIELDS:
        raise error(
            f"{what} {shown} may hold only {{form_key}} and {{attribute}}, not "
            f"{', '.join(sorted(f'{{{field[:40]}}}' for field in fields - _FIELDS))}"
        )
    if error is AwkwardFileError and any(spec or conversion for _, _, spec, conversion in parsed):
        raise error(
            f"{what} {shown} formats its fields ({{form_key}} and {{attribute}} with a format "
            "spec or a conversion): a file's template may only name them"
        )

    def getkey(node: Any, attribute: str) -> str:
        if not isinstance(node.form_key, str):
            raise AwkwardFileError(
                f"the form's {type(node).__name__} node has no form_key, so no tensor can "
                f"be named for its {attribute}"
            )
        return template.format(form_key=node.form_key, attribute=attribute)

    return getkey


def _function_key(function: Callable[..., str]) -> _GetKey:
    def getkey(node: Any, attribute: str) -> str:
        return function(form_key=node.form_key, attribute=attribute, form=node)

    return getkey


def _name(getkey: _GetKey, node: Any, attribute: str) -> str | None:
    """The tensor name of a buffer, or None when the node has no form key to name it by."""
    try:
        return getkey(node, attribute)
    except AwkwardFileError:
        return None


def _inferred(needed: list[tuple[Any, str]], names: Mapping[str, object]) -> str | None:
    """The one template of {form_key} and {attribute} that names every buffer, if one does.

    The candidates come from the tensors whose names hold the first buffer's form key (and
    its attribute); one fits when it names every buffer, each a different tensor. Two that
    fit with different names are an error: which one is meant cannot be told.
    """
    pairs = [(node.form_key, attribute) for node, attribute in needed]
    if not pairs or not all(isinstance(key, str) and key for key, _ in pairs):
        return None
    form_key, attribute = pairs[0]
    fits: dict[tuple[str, ...], str] = {}
    for name in names:
        for template in _templates(name, form_key, attribute):
            keys = tuple(template.format(form_key=key, attribute=attr) for key, attr in pairs)
            if len(set(keys)) == len(keys) and all(key in names for key in keys):
                fits.setdefault(keys, template)
    if len(fits) > 1:
        raise AwkwardFileError(
            f"the tensor names fit {len(fits)} buffer_key templates "
            f"({', '.join(map(repr, sorted(fits.values())))}) that name different tensors: "
            "pass the right one as buffer_key="
        )
    return next(iter(fits.values()), None)


def _templates(name: str, form_key: str, attribute: str) -> Iterator[str]:
    """The templates that give `name` for this form key and attribute."""
    for at in _occurrences(name, form_key):
        key_span = (at, at + len(form_key), "{form_key}")
        yield _template(name, [key_span])  # one buffer a node: no {attribute} needed
        for other in _occurrences(name, attribute):
            if other + len(attribute) <= at or at + len(form_key) <= other:
                yield _template(
                    name, sorted([key_span, (other, other + len(attribute), "{attribute}")])
                )


def _occurrences(text: str, part: str) -> Iterator[int]:
    """Where `part` is in `text`: the first `_MAX_OCCURRENCES` places (a name of one repeated
    character would otherwise make a template of every pair of places: cubic in its length)."""
    at = text.find(part)
    for _ in range(_MAX_OCCURRENCES):
        if at < 0:
            return
        yield at
        at = text.find(part, at + 1)


def _template(name: str, spans: Iterable[tuple[int, int, str]]) -> str:
    pieces = []
    done = 0
    for begin, end, field in spans:
        pieces += [_escaped(name[done:begin]), field]
        done = end
    return "".join([*pieces, _escaped(name[done:])])


def _escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


class _Plan:
    """The tensors of a form's buffers, checked against the header (and their data, once read)."""

    def __init__(self, header: Header, getkey: _GetKey, how: str, order: _Order) -> None:
        self.header = header
        self.getkey = getkey
        self.how = how  # how the names were found, for the messages
        self.order = order
        self.entries: dict[str, tuple[TensorInfo, np.dtype[Any]]] = {}
        self.data: dict[str, NDArray[Any]] | None = None
        self.trimmed: dict[str, NDArray[Any]] = {}

    def check(
        self, node: Any, attribute: str, dtype: np.dtype[Any], count: int | None
    ) -> NDArray[Any] | None:
        """Check one buffer; its values (as many as the form needs) once they are read."""
        key = self.getkey(node, attribute)
        shown = _shown_key(key)
        node_name = f"{_shown_key(node.form_key)} ({type(node).__name__})"
        where = f"the {attribute} of the form's node {node_name}"
        info = self.header.tensors.get(key)
        if info is None:
            names = list(self.header.tensors)
            names_shown = ", ".join(map(_shown_key, names[:_SHOWN_NAMES])) + (
                ", ..." if len(names) > _SHOWN_NAMES else ""
            )
            raise AwkwardFileError(
                f"no tensor {shown}, {where}, named by {self.how}; the file's tensors are "
                f"{names_shown or 'none'}",
                buffer=key,
            )
        if info.nbytes % dtype.itemsize:
            raise AwkwardFileError(
                f"tensor {shown} ({where}) has {info.nbytes:,} bytes, not a whole number of "
                f"{dtype} values ({dtype.itemsize} bytes each)",
                buffer=key,
            )
        held = info.nbytes // dtype.itemsize
        if count is not None and held < count:
            raise AwkwardFileError(
                f"tensor {shown} ({where}) holds {held:,} {dtype} values, but the form needs "
                f"{count:,}",
                buffer=key,
            )
        self.entries.setdefault(key, (info, dtype))
        if self.data is None:
            return None
        values = self.data[key] if count is None else self.data[key][:count]
        self.trimmed[key] = values.astype(dtype, copy=False)  # in the machine's order
        return values


class _Cache:
    """The buffers of a virtual array: each read once, when first asked for, then kept."""

    def __init__(self, file: SafetensorsFile, plan: _Plan, timeout: float | None) -> None:
        import threading

        self.file, self.plan, self.timeout = file, plan, timeout
        self.values: dict[str, NDArray[Any]] = {}
        self.lock = threading.Lock()

    def load(self, key: str) -> NDArray[Any]:
        with self.lock:
            found = self.values.get(key)
        if found is not None:
            return found
        info, dtype = self.plan.entries[key]
        piece = self.file.read_tensor(info, timeout=self.timeout)
        values = np.frombuffer(piece, dtype=dtype.newbyteorder(self.plan.order))
        values = values.astype(dtype, copy=False)
        with self.lock:
            return self.values.setdefault(key, values)


def _reader(
    key: str, cache: _Cache, guard: Callable[[_Cache], None] | None
) -> Callable[[], NDArray[Any]]:
    """A virtual buffer's generator: its tensor, read once; its indexes checked first."""

    def read() -> NDArray[Any]:
        values = cache.load(key)
        if guard is not None:
            guard(cache)
        return values

    return read


def _guards(form: Any, plan: _Plan) -> dict[str, Callable[[_Cache], None]]:
    """For each index buffer of a virtual array, the check of its values: within what the
    header says its contents can hold (`_capacity`), as the eager read checks them."""
    checks: dict[str, list[Callable[[_Cache], None]]] = {}
    forms = ak.forms

    def guard(keys: list[str], check: Callable[[_Cache], None]) -> None:
        for key in keys:  # (two nodes may name the same tensor: both checks hold)
            checks.setdefault(key, []).append(check)

    def visit(node: Any) -> None:
        key = plan.getkey
        if isinstance(node, forms.ListOffsetForm):
            bound = _capacity(node.content, plan)
            offsets = key(node, "offsets")
            guard([offsets], lambda cache: _check_offsets_buffer(node, cache.load(offsets), bound))
        elif isinstance(node, forms.ListForm):
            bound = _capacity(node.content, plan)
            starts, stops = key(node, "starts"), key(node, "stops")
            guard(
                [starts, stops],
                lambda cache: _check_list(node, cache.load(starts), cache.load(stops), bound),
            )
        elif isinstance(node, (forms.IndexedForm, forms.IndexedOptionForm)):
            bound = _capacity(node.content, plan)
            index = key(node, "index")
            guard([index], lambda cache: _check_index(node, cache.load(index), bound))
        elif isinstance(node, forms.UnionForm):
            bounds = [_capacity(content, plan) for content in node.contents]
            tags, index = key(node, "tags"), key(node, "index")
            guard(
                [tags, index],
                lambda cache: _check_union(node, cache.load(tags), cache.load(index), bounds),
            )
        for content in _contents(node):
            visit(content)

    visit(form)
    return {key: _all_of(found) for key, found in checks.items()}


def _all_of(checks: list[Callable[[_Cache], None]]) -> Callable[[_Cache], None]:
    def check(cache: _Cache) -> None:
        for one in checks:
            one(cache)

    return check


def _contents(form: Any) -> list[Any]:
    if hasattr(form, "contents"):
        return list(form.contents)
    return [form.content] if hasattr(form, "content") else []


def _capacity(form: Any, plan: _Plan) -> int | None:
    """The most elements `form` can have, from the sizes of its buffers in the header (None:
    no bound, a RegularArray of size 0 or a record of no field)."""
    forms = ak.forms

    def held(attribute: str) -> int:
        info, dtype = plan.entries[plan.getkey(form, attribute)]
        return info.nbytes // dtype.itemsize

    def least(*counts: int | None) -> int | None:
        known = [count for count in counts if count is not None]
        return min(known) if known else None

    if isinstance(form, forms.EmptyForm):
        return 0
    if isinstance(form, forms.NumpyForm):
        inner = math.prod(form.inner_shape)
        return held("data") // inner if inner else None
    if isinstance(form, forms.ListOffsetForm):
        return max(held("offsets") - 1, 0)
    if isinstance(form, forms.ListForm):
        return min(held("starts"), held("stops"))
    if isinstance(form, forms.RegularForm):
        content = _capacity(form.content, plan)
        return None if content is None or not form.size else content // form.size
    if isinstance(form, (forms.IndexedForm, forms.IndexedOptionForm)):
        return held("index")
    if isinstance(form, forms.ByteMaskedForm):
        return least(held("mask"), _capacity(form.content, plan))
    if isinstance(form, forms.BitMaskedForm):
        return least(held("mask") * 8, _capacity(form.content, plan))
    if isinstance(form, forms.UnionForm):
        return min(held("tags"), held("index"))
    return least(*(_capacity(content, plan) for content in _contents(form)))


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
    try:
        kind = backend_of(destination)[0]
    except TypeError:
        kind = "stream"  # a writer with write() but no read(): said below if not
    if kind in ("http", "hub"):
        raise ValueError(
            f"cannot write to {os.fspath(destination)[:80]!r}: HTTP has no standard way to "  # type: ignore[arg-type]
            "write a file; write to a path, an fsspec URL or an object store"
        )
    if kind == "path":
        views = {name: (dtype, shape, data.data) for name, (dtype, shape, data) in tensors.items()}
        return write_file(destination, views, metadata=metadata)  # type: ignore[arg-type]
    if kind == "fsspec":
        try:
            import fsspec.core  # type: ignore[import-untyped]  # optional: only for URLs
        except ModuleNotFoundError as error:
            raise missing(error, "fsspec", "writing to an fsspec URL") from None

        filesystem, path = fsspec.core.url_to_fs(destination, **(storage_options or {}))
        destination = (filesystem, path)
    header, pieces = _pieces(tensors, metadata)
    if isinstance(destination, tuple):
        if kind not in {"store", "filesystem", "fsspec"}:
            raise TypeError(
                "a (store, path) destination needs an obstore store or an fsspec filesystem, "
                f"not {type(destination[0]).__name__}"
            )
        store, path = destination
        if not hasattr(store, "cat_file"):  # an obstore store: it takes the pieces as they are
            store.put(path, pieces)
            return header
        with store.open(path, "wb") as file:  # an fsspec filesystem
            for piece in pieces:
                _replace.write_all(file, piece)
        return header
    if not hasattr(destination, "write"):
        raise TypeError(
            "destination must be a path, an fsspec URL, a (store, path) pair or a binary file "
            f"object, not {type(destination).__name__}"
        )
    for piece in pieces:
        _replace.write_all(destination, piece)  # type: ignore[arg-type]
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
