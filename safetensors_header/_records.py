"""`record`: a record class whose ``__init__`` is written for it, as a dataclass's is.

Layer: core (standard library only, no I/O).

`frozen_record` (in the core, which a reader may vendor) makes a class with ``__slots__`` what
a frozen, slotted dataclass is, its ``__init__`` written by hand: the core's records build
their values their own way. A record of the rest of the package that only stores its fields
is declared with `record` instead: its ``__init__`` takes the fields, in the order of its
``__slots__``, by position or by name, and type checkers read it from the annotations
(``dataclass_transform``), as they read a dataclass's.
"""

from __future__ import annotations

from ._core.records import field_names, frozen_record, set_fields

__all__ = ["record"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import TypeVar

    from typing_extensions import dataclass_transform

    _R = TypeVar("_R", bound=type)
else:

    def dataclass_transform(**_options: object) -> object:  # (for type checkers only)
        return lambda function: function


@dataclass_transform(frozen_default=True)
def record(*, module: str | None = None, uncompared: Iterable[str] = ()) -> Callable[[_R], _R]:
    """Make a class with ``__slots__`` (its fields, in order, annotated) and no ``__init__``
    a record: `frozen_record`'s, with an ``__init__`` of its fields (no defaults)."""
    frozen = frozen_record(module=module, uncompared=uncompared)

    def make(cls: _R) -> _R:
        if "__init__" in vars(cls):
            raise TypeError(f"{cls.__name__} has an __init__: use frozen_record")
        cls.__init__ = _init_of(cls)  # type: ignore[misc]
        return frozen(cls)

    return make


def _init_of(cls: type) -> Callable[..., None]:
    """``def __init__(self, a, b): set_fields(self, cls, (a, b))``: written out (as the
    dataclasses module writes its ``__init__``), so that it has the fields' names, for
    keywords, errors and ``help()``, and costs no more than a hand-written one."""
    names = field_names(cls)
    fields = ", ".join(names)
    namespace: dict[str, object] = {"set_fields": set_fields, "cls": cls}
    exec(f"def __init__(self, {fields}):\n    set_fields(self, cls, ({fields},))", namespace)
    init: Callable[..., None] = namespace["__init__"]  # type: ignore[assignment]
    init.__annotations__ = {name: cls.__annotations__[name] for name in names}
    init.__annotations__["return"] = "None"
    return init
