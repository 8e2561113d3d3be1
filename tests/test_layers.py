"""The package's layers: imports point one way, with no circle, and each module says its layer.

    adapters (the CLI, numpy, zarr, VirtualiZarr, Icechunk, awkward, the package's entry)
      -> services (the data path, checkpoints, the writer)
        -> sources (the options, the RangeFile protocol, its backends, the table of them)
          -> core (sans-IO: the format, the parser, the records, geometry, the audit)

The source is read, not run: every import of a module of the package (at the top, inside a
function, under ``TYPE_CHECKING``) is found with `ast`. A new module must be put in a layer
here, and say the same in its docstring (``Layer: ...``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import run_child

import safetensors_header

PACKAGE = Path(safetensors_header.__file__).parent


def _name(path: Path) -> str:
    """A module's dotted name in the package: ``numpy``, ``_parser``, ``_parser.rules``."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


PATHS = {_name(path): path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts}
MODULES = sorted(PATHS)

NAMES = ["core", "sources", "services", "adapters"]  # from the bottom up
MEMBERS = [
    [
        "_core",
        "_errors",
        "_records",
        "_totals",
        "_audit",
        "_encode",
        "_model",
        "_extras",
        "_zarr_layout",
        "_documents",
    ],
    ["_sources", "_replace"],
    [
        "_fetch",
        "_loaders",
        "_checkpoint",
        "_plan",
        "_ranks",
        "_runs",
        "_staging",
        "_hashes",
        "_writer",
        "_describe",
        "_verify",
    ],
    [
        "plan",
        "integrity",
        "model",
        "audit",
        "numpy",
        "torch",
        "jax",
        "zarr",
        "virtualizarr",
        "icechunk",
        "awkward",
        "_awkward_forms",
        "_awkward_keys",
        "_compat",
        "_cli",
        "__init__",
        "__main__",
    ],
]
LAYERS = {module: rank for rank, names in enumerate(MEMBERS) for module in names}
# A subpackage's modules are in its layer.
LAYERS.update({module: LAYERS[module.split(".")[0]] for module in MODULES if "." in module})


def _module(dotted: str) -> str:
    """The package's module that a dotted name in it is (or is in): ``""`` is ``__init__``."""
    parts = dotted.split(".") if dotted else []
    while parts and ".".join(parts) not in PATHS:
        parts.pop()  # a name in a module, not a module
    return ".".join(parts) or "__init__"


def imports(module: str) -> set[str]:
    """The package's modules that `module` imports, anywhere in its source."""
    path = PATHS[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # Where `.` is: the module's own package (the module itself, for a package's __init__).
    if path.name != "__init__.py":
        here = module.split(".")[:-1]
    else:
        here = [] if module == "__init__" else module.split(".")
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                name = node.module or ""
                if name.split(".")[0] != "safetensors_header":
                    continue
                base = name.split(".")[1:]
            else:
                base = here[: len(here) - (node.level - 1)] + (
                    node.module.split(".") if node.module else []
                )
            for alias in node.names:  # from . import x: x may be a module itself
                found.add(_module(".".join([*base, alias.name])))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "safetensors_header":
                    found.add(_module(".".join(parts[1:])))
    found.discard(module)
    return found


GRAPH = {module: imports(module) for module in MODULES}


def test_every_module_is_a_room_not_a_house() -> None:
    # A module over 700 lines holds more than one idea: split it along what it does.
    long = {
        path.relative_to(PACKAGE).as_posix(): count
        for path in PACKAGE.rglob("*.py")
        if (count := len(path.read_text().splitlines())) > 700
    }
    assert not long


def test_every_module_has_a_layer() -> None:
    assert MODULES, "no module found: the glob is wrong"
    assert set(MODULES) == set(LAYERS), "put a new module in a layer (tests/test_layers.py)"


@pytest.mark.parametrize("module", MODULES)
def test_imports_point_down(module: str) -> None:
    wrong = {
        other: NAMES[LAYERS[other]] for other in GRAPH[module] if LAYERS[other] > LAYERS[module]
    }
    assert not wrong, f"{module} ({NAMES[LAYERS[module]]}) imports from a layer above: {wrong}"


def test_the_core_imports_nothing_of_the_io_modules() -> None:
    core = [module for module in MODULES if LAYERS[module] == 0]
    assert core
    for module in core:
        assert all(LAYERS[other] == 0 for other in GRAPH[module]), (module, GRAPH[module])


def test_the_core_folder_imports_nothing_outside_itself() -> None:
    """`_core` is the parser other readers vendor (docs/embedding.md): the standard library
    and its own modules only (tests/test_vendoring.py runs a copy of it)."""
    core = [module for module in MODULES if module.split(".")[0] == "_core"]
    assert len(core) > 5
    for module in core:
        outside = {other for other in GRAPH[module] if other.split(".")[0] != "_core"}
        assert not outside, f"{module} imports {sorted(outside)}: the core imports only itself"


def test_no_circle() -> None:
    state: dict[str, int] = {}  # 1: being visited, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for other in sorted(GRAPH[module]):
            if state.get(other) == 1:
                circle = [*path[path.index(other) :], other]
                raise AssertionError("an import circle: " + " -> ".join(circle))
            if other not in state:
                visit(other, [*path, other])
        state[module] = 2

    for module in MODULES:
        if module not in state:
            visit(module, [module])


def test_the_architecture_page_lists_every_top_module_in_its_layer() -> None:
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([\w.]+)` \| (\w+) \|", page, flags=re.MULTILINE))
    top = {module for module in MODULES if "." not in module}
    assert top <= set(rows), f"add to docs/architecture.md: {sorted(top - set(rows))}"
    assert set(rows) <= set(MODULES), f"not modules: {sorted(set(rows) - set(MODULES))}"
    assert {module: NAMES[LAYERS[module]] for module in rows} == rows


# Names the refactors removed (Zarr's facts left the core; the map of a path became the
# file's own `map_whole`; the parser's package became `_core.parse`): no page or docstring
# may still send a reader to them.
GONE = [r"TensorInfo\.chunks", r"Dtype\.zarr", r"iter_chunks", r"map_file", r"\b_parser[./]"]
GONE += [r"(?<!def )\blocal_path\("]


def test_no_page_or_docstring_names_what_was_removed() -> None:
    root = PACKAGE.parent
    pages = [*sorted((root / "docs").glob("*.md")), root / "README.md", root / "CHANGELOG.md"]
    found = [
        f"{path.relative_to(root)}:{number}: {gone}"
        for path in [*pages, *sorted(PACKAGE.rglob("*.py"))]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for gone in GONE
        if re.search(gone, line)
    ]
    assert not found, found


def test_the_embedding_page_lists_only_what_the_records_have() -> None:
    # The core's records as embedding.md lists them: each name one of the record's.
    from safetensors_header import Header, TensorInfo

    page = (PACKAGE.parent / "docs" / "embedding.md").read_text(encoding="utf-8")
    for record in (Header, TensorInfo):
        listed = re.search(rf"`{record.__name__}` \(([^()]*(?:\([^()]*\)[^()]*)*)\)", page)
        assert listed is not None, record
        names = re.findall(r"`(\w+)(?:\([^)]*\))?`", listed.group(1))
        assert names, record
        assert [name for name in names if not hasattr(record, name)] == [], record


def _printed_without_site(code: str) -> str:
    """What `code` prints in a fresh interpreter without site-packages' start-up (``-S``),
    importing this checkout."""
    done = run_child(code, timeout=60, flags=("-S",))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_architecture_page_names_the_modules_importing_the_package_loads() -> None:
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    said = re.search(r"the source layer's entry \(([^)]*)\)", re.sub(r"\s+", " ", page))
    assert said is not None
    named = set(re.findall(r"`(_sources[\w.]*)`", said.group(1)))
    code = (
        "import sys, safetensors_header\n"
        "print(' '.join(sorted(m[len('safetensors_header.'):] for m in sys.modules\n"
        "    if m.startswith('safetensors_header._sources'))))\n"
    )
    assert named == set(_printed_without_site(code).split())


def test_the_architecture_page_names_every_public_member_of_a_range_file() -> None:
    from safetensors_header._sources.base import RangeFile

    page = re.sub(r"\s+", " ", (PACKAGE.parent / "docs" / "architecture.md").read_text("utf-8"))
    said = re.search(r"A `RangeFile` has (\w+) public members, (.*?) What only backends use", page)
    assert said is not None
    named = set(re.findall(r"`(\w+)(?:\([^)]*\))?`", said.group(2)))
    public = {name for name in dir(RangeFile) if not name.startswith("_")}
    assert named == public
    assert said.group(1) == {12: "twelve"}.get(len(public), str(len(public)))


@pytest.mark.parametrize("module", MODULES)
def test_each_module_says_its_layer(module: str) -> None:
    tree = ast.parse(PATHS[module].read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree) or ""
    assert f"Layer: {NAMES[LAYERS[module]]}" in docstring, (module, docstring[:300])


def test_importing_the_package_starts_no_http_store_or_thread_module() -> None:
    code = (
        "import sys, safetensors_header\n"
        "print(sorted(m for m in ('http.client', 'urllib.request', 'ssl', 'threading',\n"
        "    'concurrent.futures', 'mmap', 'fsspec', 'obstore',\n"
        "    'safetensors_header._sources.http_file', 'safetensors_header._sources.stores',\n"
        "    'safetensors_header._fetch') if m in sys.modules))\n"
    )
    assert _printed_without_site(code).strip() == "[]"


# Inside the source package: the protocol and what every backend shares import no backend;
# a backend imports no other backend but the one it reads through (a Hub file is an HTTP
# file; an fsspec file shares the stores' base and may read a signed URL over HTTP).
SHARED = ["_sources.base", "_sources.planning", "_sources.threads", "_sources.urls"]
SHARED += ["_sources.options", "_sources.transport", "_sources.hub", "_sources.identity"]
BACKENDS = {
    "_sources.local": {"_sources.streams"},
    "_sources.streams": set(),
    "_sources.http_file": {"_sources.http_exchange", "_sources.http_replies", "_sources.http_wire"},
    "_sources.http_exchange": {"_sources.http_replies", "_sources.http_wire"},
    "_sources.http_replies": set(),
    "_sources.http_wire": set(),
    "_sources.hub_files": {"_sources.http_file"},
    "_sources.stores": set(),
    "_sources.filesystems": {"_sources.stores", "_sources.http_file"},
}


def test_the_source_package_is_a_protocol_and_backends_beside_each_other() -> None:
    assert set(SHARED) | set(BACKENDS) | {"_sources"} == {
        module for module in MODULES if module.startswith("_sources")
    }
    for module in SHARED:
        assert not GRAPH[module] & set(BACKENDS), (module, GRAPH[module] & set(BACKENDS))
    for module, allowed in BACKENDS.items():
        others = GRAPH[module] & set(BACKENDS)
        assert others <= allowed, (module, others - allowed)


def test_no_private_name_is_defined_in_two_modules() -> None:
    # A private name (`_name`) is its module's own: one defined at the top of two modules is
    # one thing written twice, or two things that a reader takes for one.
    where: dict[str, list[str]] = {}
    for module in MODULES:
        for node in ast.parse(PATHS[module].read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                continue
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    where.setdefault(name, []).append(module)
    assert {name: modules for name, modules in where.items() if len(modules) > 1} == {}
