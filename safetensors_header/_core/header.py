"""The parsed header: immutable values with absolute byte ranges.

Layer: core (sans-IO).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from functools import reduce
from operator import mul
from types import MappingProxyType

from .fileformat import HEADER_LENGTH_SIZE
from .records import frozen_record, set_fields

__all__ = ["Header", "TensorInfo", "TensorTable", "make_header", "set_identity", "shown_shape"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, KeysView
    from typing import Any, Final

_SHOWN_NAME: Final = 60  # characters of a name a repr shows
_SHOWN_DIMS: Final = 8  # dimensions of a shape a repr shows
#: Lookups by name that scan the names before a table builds its index (each scan costs
#: about a twentieth of building it, for names of a few dozen characters).
_SCANS: Final = 8


@frozen_record()
class TensorInfo:
    """One tensor's entry in the header, with its place in the file.

    Attributes:
        name: The tensor's name, as in the header (after JSON unescaping).
        dtype: The dtype name as written, e.g. ``"BF16"`` (a key of ``DTYPES``).
        shape: The dimensions; ``()`` for a scalar.
        start: The absolute file offset of the tensor's first byte.
        end: The absolute file offset one past its last byte, so ``file_bytes[t.start:t.end]``
            is exactly the tensor's data.
        data_start: The absolute file offset of the data buffer (``8 + N``), which the
            header's ``data_offsets`` are relative to.
    """

    __slots__ = ("name", "dtype", "shape", "start", "end", "data_start")  # noqa: RUF023 - in order

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int
    data_start: int

    def __init__(  # noqa: PLR0917 - the fields, in order
        self, name: str, dtype: str, shape: tuple[int, ...], start: int, end: int, data_start: int
    ) -> None:
        set_fields(self, TensorInfo, (name, dtype, shape, start, end, data_start))

    @property
    def data_offsets(self) -> tuple[int, int]:
        """``(begin, end)`` as written in the header: relative to the data buffer."""
        return (self.start - self.data_start, self.end - self.data_start)

    @property
    def nbytes(self) -> int:
        """The size of the tensor's data in bytes (``end - start``)."""
        return self.end - self.start

    @property
    def numel(self) -> int:
        """The number of elements: the product of ``shape`` (1 for a scalar)."""
        return reduce(mul, self.shape, 1)  # (math.prod: math is a millisecond to import)

    def byte_ranges(self, key: object, /) -> list[tuple[int, int]]:
        """The ``(absolute offset, length)`` byte ranges that hold ``self[key]``, in order.

        `key` is numpy basic indexing (ints, slices with any step, ``...``, or a tuple of
        them, e.g. ``numpy.s_[:, 128:256]``); touching ranges are merged, and joining the
        bytes of the ranges in list order gives ``tensor[key]`` in C order. Raises
        IndexError (out of range), TypeError (an unsupported key) and ValueError (a sub-byte
        dtype cut inside a byte).
        """
        from .geometry import byte_ranges  # on first use: the import stays cheap

        return byte_ranges(self, key)

    def __repr__(self) -> str:
        return (
            f"<TensorInfo {_shown_name(self.name)} {self.dtype} {shown_shape(self.shape)}, "
            f"bytes {self.start:,}..{self.end:,}>"
        )


class _Builder:
    """A `TensorInfo` under construction: the same slots, so that it can become one.

    The frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``;
    plain slot stores followed by a change of class cost a third of that, and the object that
    results is a `TensorInfo` like any other (``type(info) is TensorInfo``).
    """

    __slots__ = TensorInfo.__slots__

    def __init__(  # noqa: PLR0917 - the fields, in order
        self, name: str, dtype: str, shape: tuple[int, ...], start: int, end: int, base: int
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.start = start
        self.end = end
        self.data_start = base
        self.__class__ = TensorInfo  # type: ignore[assignment]


# Calling the builder makes a TensorInfo.
_make_info: Callable[..., TensorInfo] = _Builder  # type: ignore[assignment]


class TensorTable(Mapping[str, TensorInfo]):
    """The tensors of a header: a read-only mapping of name to `TensorInfo`, in offset order.

    Each `TensorInfo` is made from the parser's columns when it is asked for (``table[name]``,
    or iterating over ``values()`` or ``items()``): a parse makes a few lists, not an object a
    tensor, and one entry of a large header costs no more than that entry. Entries are equal
    from one access to the next, not necessarily the same object. The index from names to rows
    is built on the ninth lookup by name; until then a lookup scans the names.
    """

    __slots__ = ("_begins", "_data_start", "_dtypes", "_ends", "_names", "_rows", "_shapes")

    def __init__(  # noqa: PLR0917 - the parser's columns, in order
        self,
        names: list[str],
        dtypes: list[str],
        shapes: list[tuple[int, ...]],
        begins: list[int],
        ends: list[int],
        data_start: int,
    ) -> None:
        # Columns in offset order, begins and ends relative to the data buffer, names
        # distinct.
        self._names, self._dtypes, self._shapes = names, dtypes, shapes
        self._begins, self._ends, self._data_start = begins, ends, data_start
        # The index, or how many lookups may still scan the names before it is built.
        self._rows: dict[str, int] | int = _SCANS

    @classmethod
    def of(cls, infos: Iterable[TensorInfo], data_start: int) -> TensorTable:
        """A table of the given entries (in offset order, sharing `data_start`)."""
        infos = list(infos)
        table = cls(
            [info.name for info in infos],
            [info.dtype for info in infos],
            [info.shape for info in infos],
            [info.start - data_start for info in infos],
            [info.end - data_start for info in infos],
            data_start,
        )
        table._row_of()  # the index now: a repeated name is found as a dict finds it (the last)
        return table

    def _row_of(self) -> dict[str, int]:
        rows = self._rows
        if type(rows) is int:
            rows = self._rows = dict(zip(self._names, range(len(self._names)), strict=True))
        return rows  # type: ignore[return-value]

    def _row(self, name: object) -> int:
        """The row of `name`; KeyError if there is none."""
        rows = self._rows
        if type(rows) is not int:
            return rows[name]  # type: ignore[index]
        # A scan finds what the index would: exact str keys (same equality, and the parser's
        # names are distinct). Any other key waits for the index, so that it is looked up as a
        # dict would: by hash, then ==.
        if rows and type(name) is str:
            self._rows = rows - 1  # (threads that race here only scan once more)
            try:
                return self._names.index(name)
            except ValueError:
                raise KeyError(name) from None
        return self._row_of()[name]  # type: ignore[index]

    def __getitem__(self, name: str) -> TensorInfo:
        row = self._row(name)
        base = self._data_start
        return _make_info(
            self._names[row],
            self._dtypes[row],
            self._shapes[row],
            base + self._begins[row],
            base + self._ends[row],
            base,
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        try:
            self._row(name)
        except KeyError:
            return False
        return True

    def keys(self) -> KeysView[str]:
        """The names, in offset order (makes no `TensorInfo`)."""
        return self._row_of().keys()

    def values(self) -> ValuesView[TensorInfo]:
        """The `TensorInfo` of every tensor, in offset order, each made as it is reached."""
        return _Values(self)

    def items(self) -> ItemsView[str, TensorInfo]:
        """``(name, TensorInfo)`` pairs, in offset order."""
        return _Items(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorTable):
            return (
                self._names == other._names
                and self._dtypes == other._dtypes
                and self._shapes == other._shapes
                and self._begins == other._begins
                and self._ends == other._ends
                and self._data_start == other._data_start
            )
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # a mapping is not hashable

    def __repr__(self) -> str:
        if not self._names:
            return "<TensorTable (no tensors)>"
        shown = ", ".join(_shown_name(name) for name in self._names[:3])
        more = f", ... ({len(self):,} tensors)" if len(self) > 3 else ""
        return f"<TensorTable {shown}{more}>"

    def __reduce__(self) -> tuple[object, ...]:
        return (
            TensorTable,
            (self._names, self._dtypes, self._shapes, self._begins, self._ends, self._data_start),
        )


def _infos(view: _Values | _Items) -> Iterator[TensorInfo]:
    """The `TensorInfo` of every row of a view's table, in order, each made as it is reached.

    The stores of `_Builder.__init__`, without a call per entry: a fifth less time a tensor.
    """
    table = view._mapping
    base = table._data_start
    new = object.__new__
    for name, dtype, shape, begin, end in zip(
        table._names, table._dtypes, table._shapes, table._begins, table._ends, strict=True
    ):
        info = new(_Builder)
        info.name = name
        info.dtype = dtype
        info.shape = shape
        info.start = base + begin
        info.end = base + end
        info.data_start = base
        info.__class__ = TensorInfo  # type: ignore[assignment]
        yield info  # type: ignore[misc]


class _Values(ValuesView[TensorInfo]):
    __slots__ = ()
    _mapping: TensorTable

    __iter__ = _infos


class _Items(ItemsView[str, TensorInfo]):
    __slots__ = ()
    _mapping: TensorTable

    def __iter__(self) -> Iterator[tuple[str, TensorInfo]]:
        return zip(self._mapping._names, _infos(self), strict=True)


@frozen_record(uncompared=("identity",))
class Header:
    """A validated safetensors header.

    Attributes:
        tensors: Read-only mapping of tensor name to ``TensorInfo``, in the order of the
            tensors' data in the file (by ``data_offsets``).
        metadata: The ``__metadata__`` map (read-only), or ``None`` when the header has none
            or ``null``. An empty ``{}`` stays an empty mapping.
        header_size: N, the length of the JSON header in bytes, padding included.
        data_size: The size of the data buffer the tensors cover: the largest end of their
            ``data_offsets`` (0 with no tensors).
        file_size: The size of the whole file, when known (always for ``read_header``; for
            ``parse_header`` only when passed). Then ``file_size == data_start + data_size``.
        identity: What the reader that read the header says of the file it came from:
            ``None`` from `parse_header`; the package's ``read_header`` gives a
            ``FileIdentity`` (its size, inode, ETag...), which a read of the data with this
            header is checked against. Opaque here, and not compared by ``==``.
    """

    __slots__ = ("tensors", "metadata", "header_size", "data_size", "file_size", "identity")  # noqa: RUF023

    tensors: Mapping[str, TensorInfo]
    metadata: Mapping[str, str] | None
    header_size: int
    data_size: int
    file_size: int | None
    identity: object

    def __init__(  # noqa: PLR0917 - the fields, in order
        self,
        tensors: Mapping[str, TensorInfo],
        metadata: Mapping[str, str] | None,
        header_size: int,
        data_size: int,
        file_size: int | None,
        identity: object = None,
    ) -> None:
        fields = (tensors, metadata, header_size, data_size, file_size, identity)
        set_fields(self, Header, fields)

    @property
    def data_start(self) -> int:
        """The absolute file offset where the data buffer begins (``8 + header_size``)."""
        return HEADER_LENGTH_SIZE + self.header_size

    def __repr__(self) -> str:
        count = len(self.tensors)
        return (
            f"<Header {count:,} tensor{'' if count == 1 else 's'}, "
            f"header_size={self.header_size:,}, file_size="
            f"{'unknown' if self.file_size is None else format(self.file_size, ',')}>"
        )

    def __reduce__(self) -> tuple[object, ...]:
        # Mapping proxies cannot be pickled; rebuild them from plain values.
        metadata = None if self.metadata is None else dict(self.metadata)
        tensors = self.tensors
        if not isinstance(tensors, TensorTable):
            tensors = TensorTable.of(list(tensors.values()), self.data_start)
        return (
            _rebuild_header,
            (tensors, metadata, self.header_size, self.data_size, self.file_size, self.identity),
        )


#: Give a `Header` just made, not yet seen by anyone, its `identity` (a reader's: the slot's
#: own store, as the builders below make records).
set_identity: Callable[[Header, object], None] = vars(Header)["identity"].__set__


class _HeaderBuilder:
    """A `Header` under construction, as `_Builder` is for `TensorInfo`."""

    __slots__ = Header.__slots__

    def __init__(self, *fields: Any) -> None:  # Header's fields, in order, but its identity
        self.tensors, self.metadata, self.header_size, self.data_size, self.file_size = fields
        self.identity = None
        self.__class__ = Header  # type: ignore[assignment]


#: Make a `Header` without the dataclass __init__'s cost (the parser's, per parse).
make_header: Callable[..., Header] = _HeaderBuilder  # type: ignore[assignment]


def _rebuild_header(tensors: TensorTable, metadata: dict[str, str] | None, *fields: Any) -> Header:
    # `fields`: the others, in order (header_size, data_size, file_size, and identity, which
    # pickles of an older version have not).
    return Header(tensors, None if metadata is None else MappingProxyType(metadata), *fields)


def _shown_name(name: str) -> str:
    shown = repr(name if len(name) <= _SHOWN_NAME else name[:_SHOWN_NAME])
    return shown if len(name) <= _SHOWN_NAME else f"{shown[:-1]}...{shown[-1]}"


def shown_shape(shape: tuple[int, ...]) -> str:
    """A shape for a message or a repr: ``[2, 3]``, its first 8 dims when it has more."""
    if len(shape) > _SHOWN_DIMS:
        return f"[{', '.join(map(str, shape[:_SHOWN_DIMS]))}, ... ({len(shape)} dims)]"
    return f"[{', '.join(map(str, shape))}]"
