"""An awkward file's form, read against its header: the buffers the form needs and how many
values of each, the bounds of their index values, and the plan of the tensors read for them
(all at once, or each when awkward first needs it).

Layer: adapters (the reading of `safetensors_header.awkward`; needs awkward and numpy).

`walk_form` visits the buffers as ``ak.from_buffers`` reads them; `Plan` checks each against
the header (its tensor there, whole values, enough of them) and, once read, its index values
against their contents; `Cache` and `index_guards` do the same for a virtual array, each
buffer when it is first read. `AwkwardFileError` is every refusal's error.
"""

from __future__ import annotations

import math

import awkward as ak  # type: ignore[import-untyped]  # awkward ships no type information
import numpy as np

__all__ = ["BUFFER_KEY", "BYTEORDER", "FORM", "LENGTH", "SHOWN_TEMPLATE", "AwkwardFileError"]
__all__ += ["Cache", "Plan", "form_and_length", "index_guards", "recorded_byteorder"]
__all__ += ["shown_key", "walk_form"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, Final, Literal, TypeAlias

    from numpy.typing import NDArray

    from ._core.header import Header, TensorInfo
    from ._fetch import SafetensorsFile

    #: The tensor name of a buffer: of its form node and its attribute.
    GetKey: TypeAlias = Callable[[Any, str], str]
    Visit: TypeAlias = Callable[[Any, str, "np.dtype[Any]", "int | None"], "NDArray[Any] | None"]
    Order: TypeAlias = Literal["<", ">"]

# The keys of __metadata__: awkward's two, and the two `to_safetensors` writes when needed.
FORM: Final = "form"
LENGTH: Final = "length"
BUFFER_KEY: Final = "buffer_key"
BYTEORDER: Final = "byteorder"
_MAX_LENGTH_DIGITS: Final = 20  # 2^64 has 20 digits; int() of a longer text is only slow
_SHOWN_NAMES: Final = 6  # tensor names an error message lists
SHOWN_TEMPLATE: Final = 80  # characters of a buffer_key template an error message shows
# The dtypes of awkward's index buffers (offsets, starts, stops, index, tags, masks).
_INDEX_DTYPES: Final[dict[str, np.dtype[Any]]] = {
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "i32": np.dtype(np.int32),
    "u32": np.dtype(np.uint32),
    "i64": np.dtype(np.int64),
}


class AwkwardFileError(ValueError):
    """A valid safetensors file, but one that holds no awkward array (or not all of one).

    Attributes:
        buffer: The tensor at fault (missing, too short, ...), where there is one, else
            ``None``.

    The message says what the form needs and what the file has. A file that is not valid
    safetensors raises the library's `HeaderError` instead.
    """

    __module__ = "safetensors_header.awkward"  # where it is imported from (reprs, pickles)

    def __init__(self, message: str, *, buffer: str | None = None) -> None:
        super().__init__(message)
        self.buffer = buffer


def form_and_length(metadata: Mapping[str, str]) -> tuple[Any, int]:
    missing = [key for key in (FORM, LENGTH) if key not in metadata]
    if missing:
        has = f"its keys are {', '.join(map(repr, metadata))}" if metadata else "it has none"
        raise AwkwardFileError(
            f"not a file of an awkward array: its __metadata__ has no "
            f"{' and no '.join(map(repr, missing))} ({has}); ak.to_safetensors and "
            "to_safetensors write both"
        )
    try:
        form = ak.forms.from_json(metadata[FORM])
    except Exception as error:  # json, KeyError, TypeError, ValueError...: all mean the same
        raise AwkwardFileError(
            f"the metadata's form is not an awkward form: {type(error).__name__}: {error}"[:300]
        ) from None
    text = metadata[LENGTH]
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_LENGTH_DIGITS):
        raise AwkwardFileError(
            f"the metadata's length must be a non-negative integer, not {text[:40]!r}"
        )
    return form, int(text)


def recorded_byteorder(metadata: Mapping[str, str]) -> Literal["<", ">"]:
    recorded = metadata.get(BYTEORDER, "<")
    if recorded == "<":
        return "<"
    if recorded == ">":
        return ">"
    raise AwkwardFileError(f"the metadata's byteorder must be '<' or '>', not {recorded[:40]!r}")


def walk_form(form: Any, length: int | None, visit: Visit) -> None:
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
        walk_form(form.content, length, visit)
    elif isinstance(form, forms.BitMaskedForm):
        mask = _index_dtype(form, "mask", form.mask)
        visit(form, "mask", mask, None if length is None else -(-length // 8))
        walk_form(form.content, length, visit)
    elif isinstance(form, forms.ByteMaskedForm):
        visit(form, "mask", _index_dtype(form, "mask", form.mask), length)
        walk_form(form.content, length, visit)
    elif isinstance(form, (forms.IndexedOptionForm, forms.IndexedForm)):
        index = visit(form, "index", _index_dtype(form, "index", form.index), length)
        if index is not None:
            _check_index(form, index, None)
        walk_form(form.content, _past_max(index), visit)
    elif isinstance(form, forms.ListForm):
        starts = visit(form, "starts", _index_dtype(form, "starts", form.starts), length)
        stops = visit(form, "stops", _index_dtype(form, "stops", form.stops), length)
        if starts is not None and stops is not None:
            _check_list(form, starts, stops, None)
        walk_form(form.content, _list_end(starts, stops), visit)
    elif isinstance(form, forms.ListOffsetForm):
        offsets_dtype = _index_dtype(form, "offsets", form.offsets)
        offsets = visit(form, "offsets", offsets_dtype, _plus_one(length))
        if offsets is not None:
            _check_offsets_buffer(form, offsets, None)
        end = None if offsets is None else int(offsets[-1]) if len(offsets) > 1 else 0
        walk_form(form.content, end, visit)
    elif isinstance(form, forms.RegularForm):
        walk_form(form.content, None if length is None else length * form.size, visit)
    elif isinstance(form, forms.RecordForm):
        for content in form.contents:
            walk_form(content, length, visit)
    elif isinstance(form, forms.UnionForm):
        if not form.contents:
            raise AwkwardFileError("the form has a UnionArray with no contents")
        tags = visit(form, "tags", _index_dtype(form, "tags", form.tags), length)
        index = visit(form, "index", _index_dtype(form, "index", form.index), length)
        if tags is not None and index is not None:
            _check_union(form, tags, index, [None] * len(form.contents))
        for tag, content in enumerate(form.contents):
            selected = None if tags is None or index is None else index[tags == tag]
            walk_form(content, _past_max(selected), visit)
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
            f"the form's {type(form).__name__} node {shown_key(form.form_key)} has {attribute} of "
            f"type {shown_key(name)}; awkward takes {', '.join(map(repr, allowed))}"
        )
    return _INDEX_DTYPES[name]


def shown_key(text: object) -> str:
    """A name from a file, for a message: its repr, cut to `SHOWN_TEMPLATE` characters."""
    shown = repr(text)
    return shown if len(shown) <= SHOWN_TEMPLATE else shown[:SHOWN_TEMPLATE] + "..."


def _out_of_bounds(form: Any, attribute: str, problem: str) -> AwkwardFileError:
    return AwkwardFileError(
        f"the {attribute} of the form's {type(form).__name__} node {shown_key(form.form_key)} "
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


class Plan:
    """The tensors of a form's buffers, checked against the header (and their data, once read)."""

    def __init__(self, header: Header, getkey: GetKey, how: str, order: Order) -> None:
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
        shown = shown_key(key)
        node_name = f"{shown_key(node.form_key)} ({type(node).__name__})"
        where = f"the {attribute} of the form's node {node_name}"
        info = self.header.tensors.get(key)
        if info is None:
            names = list(self.header.tensors)
            names_shown = ", ".join(map(shown_key, names[:_SHOWN_NAMES])) + (
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


class Cache:
    """The buffers of a virtual array: each read once, when first asked for, then kept."""

    def __init__(self, file: SafetensorsFile, plan: Plan, timeout: float | None) -> None:
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


def index_guards(form: Any, plan: Plan) -> dict[str, Callable[[Cache], None]]:
    """For each index buffer of a virtual array, the check of its values: within what the
    header says its contents can hold (`_capacity`), as the eager read checks them."""
    checks: dict[str, list[Callable[[Cache], None]]] = {}
    forms = ak.forms

    def guard(keys: list[str], check: Callable[[Cache], None]) -> None:
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


def _all_of(checks: list[Callable[[Cache], None]]) -> Callable[[Cache], None]:
    def check(cache: Cache) -> None:
        for one in checks:
            one(cache)

    return check


def _contents(form: Any) -> list[Any]:
    if hasattr(form, "contents"):
        return list(form.contents)
    return [form.content] if hasattr(form, "content") else []


def _capacity(form: Any, plan: Plan) -> int | None:
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
