"""Records: the package's one idiom for public values (`Header`, `TensorInfo`, `Checkpoint`...).

Layer: core.

A record is a class with ``__slots__`` (its fields, in order, annotated) and an ``__init__``
that stores them with `set_fields`; `frozen_record` makes it what
``@dataclass(frozen=True, slots=True)`` would, without importing `dataclasses` (with
`inspect`, a tenth of the package's import time). `dataclasses.fields` and `replace` work
all the same (the metadata is made by `dataclasses` when first asked for); `asdict` too, but
of a record holding a mapping proxy (a `Header`'s metadata), which it cannot copy.
"""

from __future__ import annotations

from operator import attrgetter

__all__ = ["field_names", "frozen_record", "publish", "set_fields"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Final, TypeVar

    _R = TypeVar("_R", bound=type)

_METADATA: Final = ("__dataclass_fields__", "__dataclass_params__")
# Where records say they live (help(), reprs, pickles by reference): in safetensors_header, its
# top level, which exports them all; in a copy of this folder vendored under another name, the
# folder's own package, whose __init__ exports the core's.
_HERE: Final = __name__.rpartition(".")[0]
_PACKAGE: Final = "safetensors_header" if _HERE == "safetensors_header._core" else _HERE


def field_names(cls: type) -> tuple[str, ...]:
    """A record class's fields, in order: its own ``__slots__``."""
    names: tuple[str, ...] = vars(cls)["__slots__"]
    return names


def frozen_record(
    *, uncompared: Iterable[str] = (), module: str | None = None
) -> Callable[[_R], _R]:
    """Make a class a frozen dataclass, as described in this module's docstring.

    Added: ``__eq__`` and ``__hash__`` over the fields (except those in `uncompared`, as a
    dataclass field with ``compare=False``), ``__match_args__``, ``__replace__``, a default
    ``__reduce__`` (the fields, to ``__init__``; Python 3.10's frozen slotted dataclasses
    cannot pickle without one) unless the class has its own, an ``__setattr__`` and
    ``__delattr__`` that raise ``dataclasses.FrozenInstanceError``, and the dataclass
    metadata (made on first use). The record says it lives where users find it, at the
    package's top level (for help(), reprs and pickles by reference).
    """
    skipped = frozenset(uncompared)

    def make(cls: _R) -> _R:
        names = field_names(cls)
        missing = skipped.difference(names)
        if missing:
            raise TypeError(f"{cls.__name__} has no fields {sorted(missing)}")
        compared = attrgetter(*[name for name in names if name not in skipped])
        every = attrgetter(*names)

        def __eq__(self: object, other: object) -> bool:
            if other.__class__ is self.__class__:
                return bool(compared(self) == compared(other))
            return NotImplemented

        def __hash__(self: object) -> int:
            return hash(compared(self))

        def __replace__(self: object, /, **changes: object) -> object:
            import dataclasses

            return dataclasses.replace(self, **changes)  # type: ignore[type-var]

        def __setattr__(self: object, name: str, value: object) -> None:
            _refuse_change(f"cannot assign to field {name!r}")

        def __delattr__(self: object, name: str) -> None:
            _refuse_change(f"cannot delete field {name!r}")

        def __reduce__(self: object) -> tuple[object, ...]:
            values = every(self)
            return (self.__class__, values if len(names) > 1 else (values,))

        added: dict[str, object] = {
            "__eq__": __eq__,
            "__hash__": __hash__,
            "__replace__": __replace__,
            "__setattr__": __setattr__,
            "__delattr__": __delattr__,
            "__match_args__": names,
        }
        if "__reduce__" not in vars(cls):
            added["__reduce__"] = __reduce__
        added.update({name: _DataclassMetadata(cls, name, skipped) for name in _METADATA})
        for attribute, value in added.items():
            setattr(cls, attribute, value)
        return publish(cls, module)

    return make


def publish(cls: _R, module: str | None = None) -> _R:
    """Say that `cls` lives where users find it: at the package's top level, or in the public
    `module` that exports it; the class and the functions in it (help(), reprs and pickles
    by reference name no private module)."""
    where = _PACKAGE if module is None else module
    cls.__module__ = where
    for name, value in vars(cls).items():
        function = getattr(value, "__func__", value)  # a classmethod's or staticmethod's too
        function = getattr(function, "fget", function)  # a property's getter
        if callable(function) and hasattr(function, "__qualname__"):
            try:  # (not contextlib.suppress: importing contextlib costs a start 0.3 ms)
                function.__module__ = where
                function.__qualname__ = f"{cls.__qualname__}.{name}"
            except (AttributeError, TypeError):  # builtins: read-only
                pass
    return cls


def set_fields(record: object, cls: type, values: tuple[object, ...]) -> None:
    """A record's ``__init__``: `cls`'s fields (its ``__slots__``, in order) from `values`.

    (`cls`, not the record's type: a subclass may add slots of its own.)
    """
    for name, value in zip(field_names(cls), values, strict=True):
        object.__setattr__(record, name, value)


def _returning(value: object) -> Callable[[], object]:
    def factory() -> object:
        return value

    return factory


def _refuse_change(message: str) -> None:
    from dataclasses import FrozenInstanceError  # only on this error

    raise FrozenInstanceError(message)


class _DataclassMetadata:
    """A record class's ``__dataclass_fields__`` or ``__dataclass_params__`` until read; then
    those of the dataclass it would have been, made by `dataclasses`, take their place (a
    subclass inherits them, as a dataclass's does)."""

    def __init__(self, record: type, attribute: str, uncompared: frozenset[str]) -> None:
        self._record, self._attribute, self._uncompared = record, attribute, uncompared

    def __get__(self, instance: object, owner: type) -> object:
        import dataclasses

        record = self._record
        init = vars(record)["__init__"]  # the record's own
        code = init.__code__
        # The defaults of __init__, by parameter name, become the fields' defaults.
        positional = code.co_varnames[1 : code.co_argcount]
        defaults = dict(zip(positional[::-1], (init.__defaults__ or ())[::-1], strict=False))
        defaults.update(init.__kwdefaults__ or {})
        fields = []
        for name in field_names(record):
            compare = name not in self._uncompared
            default = defaults.get(name, dataclasses.MISSING)
            if default is not dataclasses.MISSING and type(default).__hash__ is None:
                # dataclasses takes no unhashable default (as mutable), but a factory.
                field = dataclasses.field(default_factory=_returning(default), compare=compare)
            elif default is not dataclasses.MISSING:
                field = dataclasses.field(default=default, compare=compare)
            else:
                field = dataclasses.field(compare=compare)
            fields.append((name, record.__annotations__[name], field))
        # As @dataclass(frozen=True, slots=True, repr=False) would have made it.
        twin = dataclasses.make_dataclass(
            record.__name__, fields, frozen=True, slots=True, repr=False
        )
        for attribute in _METADATA:
            type.__setattr__(record, attribute, getattr(twin, attribute))
        return getattr(owner, self._attribute)
