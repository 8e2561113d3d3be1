"""The tensor names of an awkward file's buffers: awkward's ``buffer_key`` (a template of
``{form_key}`` and ``{attribute}``, or a function), given, recorded in the file, or worked out
from the tensor names.

Layer: adapters (the reading of `safetensors_header.awkward`).
"""

from __future__ import annotations

import string

from ._awkward_forms import BUFFER_KEY, SHOWN_TEMPLATE, AwkwardFileError, shown_key

__all__ = ["DEFAULT_BUFFER_KEY", "resolved_key"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping
    from typing import Any, Final, TypeAlias

    from ._awkward_forms import GetKey
    from ._core.header import Header

    #: A ``buffer_key`` as awkward takes it: a template of ``{form_key}`` and ``{attribute}``,
    #: or a function of the keywords ``form_key``, ``attribute`` and ``form``.
    BufferKey: TypeAlias = str | Callable[..., str]

#: awkward's default ``buffer_key`` (of ``ak.to_buffers`` and ``ak.to_safetensors``).
DEFAULT_BUFFER_KEY: Final = "{form_key}-{attribute}"
_FIELDS: Final = frozenset({"form_key", "attribute"})
# Places of a form key (and of an attribute) in a tensor name tried when inferring the
# buffer_key: awkward's names hold each once; more is a hostile or a very odd name.
_MAX_OCCURRENCES: Final = 8


def resolved_key(
    requested: BufferKey | None,
    metadata: Mapping[str, str],
    needed: list[tuple[Any, str]],
    header: Header,
) -> tuple[GetKey, str]:
    """The tensor name of each buffer, and what to say when one is missing."""
    if requested is not None:
        if callable(requested):
            return _function_key(requested), "the buffer_key function given"
        return _template_key(requested, "buffer_key"), f"buffer_key={shown_key(requested)}"
    recorded = metadata.get(BUFFER_KEY)
    if recorded is not None:
        where = "the buffer_key recorded in the metadata"
        return _template_key(
            recorded, where, error=AwkwardFileError
        ), f"{where}, {shown_key(recorded)}"
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


def _template_key(template: object, what: str, *, error: type[Exception] = ValueError) -> GetKey:
    """The names a template gives. One recorded in a file (`error` AwkwardFileError) may hold
    the two fields and nothing else: no format spec or conversion (``{form_key:>1000000000}``
    would make a name of a gigabyte)."""
    if not isinstance(template, str):
        raise TypeError(f"{what} must be a str or a callable, not {type(template).__name__}")
    shown = repr(template[:SHOWN_TEMPLATE]) + ("..." if len(template) > SHOWN_TEMPLATE else "")
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


def _function_key(function: Callable[..., str]) -> GetKey:
    def getkey(node: Any, attribute: str) -> str:
        return function(form_key=node.form_key, attribute=attribute, form=node)

    return getkey


def _name(getkey: GetKey, node: Any, attribute: str) -> str | None:
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
