"""Every kind the package's source can produce is registered: `KINDS`, `FINDING_KINDS`.

The source is read, not run: every call of something that takes a kind (`HeaderError`,
`Finding`, and any function whose first parameter is ``kind``, e.g. ``fail``) and every
comparison of a ``.kind`` with a string is found with `ast`, and its string must be in the
registry. A kind the scanner cannot read (built at run time) fails the test too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import safetensors_header
from safetensors_header import KINDS
from safetensors_header.audit import FINDING_KINDS

PACKAGE = Path(safetensors_header.__file__).parent
SOURCES = sorted(path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)

# The callables known to take a kind first, whatever their parameters are called; the scan
# adds every function (or class, by its __init__) whose first parameter is `kind`.
FINDING_MAKERS = frozenset({"Finding"})
ERROR_MAKERS = frozenset({"HeaderError"})


@dataclass(frozen=True)
class Use:
    """One kind as the source writes it."""

    registry: str  # "KINDS", "FINDING_KINDS", or "any" (a `.kind` comparison)
    kind: str | None  # None: not a string the scan can read
    where: str  # file:line


def kind_takers(trees: list[ast.Module]) -> set[str]:
    """The names of the package's own callables whose first parameter is `kind`."""
    names = set(ERROR_MAKERS | FINDING_MAKERS)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = [
                    item.target.id
                    for item in node.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                ]
                inits = [
                    item
                    for item in node.body
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__"
                ]
                if (fields[:1] == ["kind"] and not inits) or any(
                    _first_parameter(init, method=True) == "kind" for init in inits
                ):
                    names.add(node.name)
            elif isinstance(node, ast.FunctionDef) and _first_parameter(node) == "kind":
                names.add(node.name)
    return names


def _first_parameter(function: ast.FunctionDef, *, method: bool = False) -> str | None:
    parameters = [*function.args.posonlyargs, *function.args.args][1 if method else 0 :]
    return parameters[0].arg if parameters else None


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _strings(node: ast.expr) -> list[str | None] | None:
    """The strings a kind expression can be; None for a value passed on (a variable)."""
    if isinstance(node, ast.Constant):
        return [node.value if isinstance(node.value, str) else None]
    if isinstance(node, ast.IfExp):
        return [*(_strings(node.body) or []), *(_strings(node.orelse) or [])]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [string for element in node.elts for string in _strings(element) or []]
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return None  # forwarded: e.g. HeaderError(error.kind, ...) restating an error
    return [None]  # an f-string, a concatenation, a call: a kind made at run time


def kind_uses(source: str, filename: str, takers: set[str]) -> list[Use]:
    """Every kind written in `source`: in calls of `takers`, and in ``.kind`` comparisons."""
    uses: list[Use] = []
    # In source order (ast.walk goes breadth first).
    nodes = sorted(
        (node for node in ast.walk(ast.parse(source, filename)) if isinstance(node, ast.expr)),
        key=lambda node: (node.lineno, node.col_offset),
    )
    for node in nodes:
        where = f"{filename}:{node.lineno}"
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name is None or not (name in takers or name.lstrip("_").startswith("raise_")):
                continue
            registry = "FINDING_KINDS" if name in FINDING_MAKERS else "KINDS"
            argument = node.args[0] if node.args else None
            for keyword in node.keywords:
                if keyword.arg == "kind":
                    argument = keyword.value
            if argument is None or isinstance(argument, ast.Starred):
                continue  # e.g. HeaderError(*args) in a rebuild from a pickle
            uses.extend(Use(registry, kind, where) for kind in _strings(argument) or [])
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(side, ast.Attribute) and side.attr == "kind" for side in sides):
                uses.extend(
                    Use("any", kind, where) for side in sides for kind in _strings(side) or []
                )
    return uses


def unregistered(uses: list[Use]) -> list[Use]:
    registries = {
        "KINDS": set(KINDS),
        "FINDING_KINDS": set(FINDING_KINDS),
        "any": {*KINDS, *FINDING_KINDS},
    }
    return [use for use in uses if use.kind not in registries[use.registry]]


@pytest.fixture(scope="module")
def package_uses() -> list[Use]:
    assert len(SOURCES) > 10, PACKAGE  # the glob found the package
    texts = {str(path.relative_to(PACKAGE)): path.read_text(encoding="utf-8") for path in SOURCES}
    takers = kind_takers([ast.parse(text) for text in texts.values()])
    # The makers in use today; one renamed must not leave the scan blind.
    assert {"HeaderError", "Finding", "fail", "_fault"} <= takers
    return [use for name, text in texts.items() for use in kind_uses(text, name, takers)]


def test_every_kind_in_the_source_is_registered(package_uses: list[Use]) -> None:
    assert len(package_uses) > 30  # the scan found the package's raises (41 today)
    assert unregistered(package_uses) == []


def test_every_registered_kind_is_produced_somewhere(package_uses: list[Use]) -> None:
    # A registry is the list of what can happen: no name in it that nothing produces.
    made = {use.kind for use in package_uses if use.registry != "any"}
    assert set(KINDS) - made == set()
    assert set(FINDING_KINDS) - made == set()


def test_the_registries_hold_distinct_camel_case_names() -> None:
    for registry in (KINDS, tuple(FINDING_KINDS)):
        assert len(set(registry)) == len(registry)
        for kind in registry:
            assert kind.isidentifier()
            assert kind[0].isupper()
            assert "_" not in kind
    assert set(KINDS).isdisjoint(FINDING_KINDS)


# A source with one of each mistake, and one correct use of each form.
SYNTHETIC = """
def _oops(kind, message):
    raise HeaderError(kind, message)

class Lapse:
    def __init__(self, kind, message): ...

raise HeaderError("NoSuchKind", "a typo in a raise")
_oops("InvalidOffset", "registered")
_oops("Typo", "a helper found by its parameter")
Lapse("Slip", "a class found by its __init__")
findings.append(Finding("Paddding", "a finding"))
Finding("Padding", "registered")
raise_bad("Nope")
HeaderError(kind="Keyword", message="m")
HeaderError("InvalidHeader" if flag else "Either", "m")
HeaderError(f"Made{at}Runtime", "m")
HeaderError(error.kind, "forwarded: not a literal")
if error.kind == "Misspelt" or finding.kind in ("TotalSize", "Other"):
    pass
"""


def test_the_scan_finds_each_kind_of_mistake() -> None:
    tree = ast.parse(SYNTHETIC)
    takers = kind_takers([tree])
    assert {"_oops", "Lapse", "HeaderError", "Finding"} <= takers
    found = unregistered(kind_uses(SYNTHETIC, "synthetic.py", takers))
    assert [(use.registry, use.kind) for use in found] == [
        ("KINDS", "NoSuchKind"),
        ("KINDS", "Typo"),
        ("KINDS", "Slip"),
        ("FINDING_KINDS", "Paddding"),
        ("KINDS", "Nope"),
        ("KINDS", "Keyword"),
        ("KINDS", "Either"),
        ("KINDS", None),
        ("any", "Misspelt"),
        ("any", "Other"),
    ]
    assert found[0].where == "synthetic.py:8"
    # The correct ones were seen, and passed.
    seen = {use.kind for use in kind_uses(SYNTHETIC, "synthetic.py", takers)}
    assert {"InvalidOffset", "Padding", "InvalidHeader", "TotalSize"} <= seen


def test_a_finding_kind_is_not_an_error_kind() -> None:
    # Each registry is checked on its own: a finding's kind raised as an error is a mistake.
    source = 'raise HeaderError("Padding", "m")\nFinding("InvalidOffset", "m")\n'
    found = unregistered(kind_uses(source, "mixed.py", kind_takers([ast.parse(source)])))
    assert [(use.registry, use.kind) for use in found] == [
        ("KINDS", "Padding"),
        ("FINDING_KINDS", "InvalidOffset"),
    ]
