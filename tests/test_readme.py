"""The Python examples of the README and the docs pages run as written, each in a fresh empty
folder: an example makes the files it reads, or says in a visible first line which example of
its page makes them (``# Reads NAME, which the first example of this page makes.``) or what
it needs that a test machine does not have (``# Needs ...``, skipped with that reason). The
Hugging Face Hub's examples run against a loopback Hub through ``HF_ENDPOINT``."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import build, tensor, untraced_environment

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = [
    (page.stem, number, block)
    for page in PAGES
    for number, block in enumerate(
        re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL), start=1
    )
]
BLOCKS = [block for page, _, block in EXAMPLES if page == "README"]
TEXTS = {page.stem: page.read_text() for page in PAGES}
NEEDS = ("zarr", "fsspec", "virtualizarr", "numpy", "icechunk", "dask", "awkward", "obstore")
NEEDS += ("torch", "jax")  # (their own nox sessions run those pages' examples)
# "# Reads first.safetensors, which the first example of this page makes."
READS = re.compile(r"^# Reads (\S+), which the first example of this page makes\.$", re.MULTILINE)
# "# Needs AWS credentials and ...": what the example needs that a test machine has not.
NEEDS_LINE = re.compile(r"^# Needs (.+)$", re.MULTILINE)
# The Hub's files and repositories the examples name: hf://org/repo[@revision][/file].
HUB_PATHS = re.compile(r"hf://([\w.-]+)/([\w.-]+)(?:@([\w.-]+))?(?:/([\w./-]+))?")


def test_the_readme_and_the_site_have_examples() -> None:
    assert len(BLOCKS) >= 3
    assert len(EXAMPLES) >= 20


def runnable() -> list[object]:
    cases = []
    for page, number, block in EXAMPLES:
        reason = next((f"needs {m[1]}" for m in NEEDS_LINE.finditer(block)), None)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        if page != "README":
            marks.append(pytest.mark.docs)
        if "LocalCluster(" in block:  # worker processes start: seconds
            marks.append(pytest.mark.slow)
        name = "block" if page == "README" else page
        cases.append(pytest.param(page, block, id=f"{name}-{number}", marks=marks))
    return cases


def first_example(page: str) -> str:
    return next(block for name, _, block in EXAMPLES if name == page)


def serve_the_hub(site: Any, block: str) -> None:
    """Every file and repository of the Hub that `block` names, small, on the loopback Hub:
    a file as one tensor (``wte.weight``, as GPT-2's), a repository or an index as an index
    and two shards."""
    shards = {
        "model-00001-of-00002.safetensors": {"model.embed_tokens.weight": [8, 4]},
        "model-00002-of-00002.safetensors": {"lm_head.weight": [8, 4], "model.norm.weight": [4]},
    }
    for org, repo, revision, path in HUB_PATHS.findall(block):
        base = f"{org}/{repo}/resolve/{revision or 'main'}"
        if path and not path.endswith(".index.json"):
            site.files[f"{base}/{path}"] = _file({"wte.weight": [8, 4]})
            continue
        index = {"weight_map": {t: shard for shard, ts in shards.items() for t in ts}}
        site.files[f"{base}/{path or 'model.safetensors.index.json'}"] = json.dumps(index).encode()
        for shard, tensors in shards.items():
            site.files[f"{base}/{shard}"] = _file(tensors)


def _file(shapes: dict[str, list[int]]) -> bytes:
    entries, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * shape[0] * (shape[1] if len(shape) > 1 else 1)
        entries[name] = tensor("BF16", shape, offset, offset + size)
        offset += size
    return build({"__metadata__": {"format": "pt"}, **entries}, offset)


# What a page names as its examples' needs: every `pip install ...` written on it.
PIP_INSTALL = re.compile(r"pip install ([^`#&;]*)")
# The options of pip install whose value is the next word (not a requirement).
_OPTION_VALUES = frozenset({"-i", "--index-url", "--extra-index-url", "-f", "--find-links"})


def named_distributions(text: str) -> tuple[set[str], set[str]]:
    """What a page's ``pip install`` commands install: the project's extras, and other
    distributions by name (normalized), before their dependencies."""
    import shlex

    extras: set[str] = set()
    others: set[str] = set()
    # The commands: the lines of code blocks, and code spans of the prose (which may wrap).
    lines = [
        line
        for block in re.findall(r"```\w*\n(.*?)```", text, re.DOTALL)
        for line in block.splitlines()
    ]
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    lines += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    for command in (found for line in lines for found in PIP_INSTALL.findall(line)):
        try:
            words = iter(shlex.split(command))
        except ValueError:  # (a quote the command's text cut)
            continue
        for word in words:
            if word in _OPTION_VALUES:
                next(words, None)  # its value
            elif word.startswith((".", "safetensors_header")):  # -e . too
                extras.update(_extras_of(word))
            elif not word.startswith("-"):
                name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", word)
                if name is not None:
                    others.add(_normalized(name[0]))
    return extras, others


def _extras_of(word: str) -> set[str]:
    found = re.search(r"\[([^\]]*)\]", word)
    return {"."} | ({extra.strip() for extra in found[1].split(",")} if found else set())


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def allowed_modules(text: str) -> set[str]:
    """The top-level modules an example of a page with this text may import, directly or
    through safetensors_header: those of the distributions its ``pip install`` commands
    name (the project's extras as pyproject.toml lists them) and of their dependencies, as
    installed here."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib  # type: ignore[no-redef]

    extras, wanted = named_distributions(text)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    seen_extras: set[str] = set()
    queue = [extra for extra in extras if extra != "."]
    while queue:
        extra = queue.pop()
        if extra in seen_extras or extra not in optional:
            continue
        seen_extras.add(extra)
        for text_requirement in optional[extra]:
            requirement = Requirement(text_requirement)
            if _normalized(requirement.name) == "safetensors-header":
                queue.extend(requirement.extras)
            elif requirement.marker is None or requirement.marker.evaluate():
                wanted.add(_normalized(requirement.name))
    # Their dependencies, as installed (a distribution not installed has none to follow).
    closure: set[str] = set()
    pending = [(name, frozenset[str]()) for name in wanted]
    while pending:
        name, asked = pending.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is not None and not any(
                marker.evaluate({"extra": extra}) for extra in (asked or {""})
            ):
                continue
            pending.append((_normalized(requirement.name), frozenset(requirement.extras)))
    modules = {"safetensors_header"}
    for distribution in metadata.distributions():
        if _normalized(distribution.metadata["Name"] or "") in closure:
            modules.update(_top_level(distribution))
    return modules


def _top_level(distribution: Any) -> set[str]:
    """The top-level modules a distribution installs: its top_level.txt, else the first
    part of each file it installed (what Python 3.11's packages_distributions does; 3.10's
    reads top_level.txt only, which numpy's wheels do not have)."""
    listed = distribution.read_text("top_level.txt")
    if listed:
        return set(listed.split())
    found = set()
    for file in distribution.files or ():
        if not file.parts:
            continue
        first = file.parts[0]
        if len(file.parts) == 1:  # a module at the top: six.py, _cffi_backend.cpython-...so
            first = first.split(".")[0]
        if first.isidentifier() and first != "__pycache__":  # (not name-1.0.dist-info, ..)
            found.add(first)
    return found


# Run before an example: an import of a module the page does not name (by the example, or
# by safetensors_header on its behalf) fails as it would where only what the page names is
# installed; what a named library imports is its own business (its dependencies).
_GUARD = """\
import os as _os
import sys as _sys

class _OnlyWhatThePageNames:
    allowed = frozenset({allowed!r})

    def find_spec(self, name, path=None, target=None):
        if path is not None or name in _sys.stdlib_module_names or name in self.allowed:
            return None
        if _os.path.exists(name) or _os.path.exists(name + ".py"):
            return None  # a module the example made in its folder
        frame = _sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").startswith(
            ("importlib", "_frozen_importlib")
        ):
            frame = frame.f_back
        importer = "" if frame is None else frame.f_globals.get("__name__", "")
        if importer.partition(".")[0] in ("__main__", "safetensors_header"):
            raise ModuleNotFoundError(
                f"No module named {{name!r}}: this page's pip install commands do not name "
                "what installs it (tests/test_readme.py)",
                name=name,
            )
        return None

_sys.meta_path.insert(0, _OnlyWhatThePageNames())
"""


def guarded(block: str, allowed: set[str]) -> str:
    """`block`, run where only the modules `allowed` (and the standard library) import."""
    return _GUARD.format(allowed=sorted(allowed)) + block


def run(block: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", block],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


@pytest.mark.parametrize(("page", "block"), runnable())
def test_example_runs_in_an_empty_folder(
    page: str, block: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    for module in NEEDS:
        imported = re.search(rf"^\s*(from|import) {module}\b", block, re.MULTILINE)
        if imported and importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    # The examples run as a user runs them, untraced by coverage: they teach, the tests cover.
    env = untraced_environment(HF_HOME=str(tmp_path / "hf-home"))
    for name in ("HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        env.pop(name, None)
    hub = None
    if "hf://" in block or "HF_ENDPOINT" in block:
        hub = request.getfixturevalue("site")
        serve_the_hub(hub, block)
        env["HF_ENDPOINT"] = hub.url("").rstrip("/")
    folder = tmp_path / "empty"
    folder.mkdir()
    # Only what the page names can be imported: an example that needs more says so.
    allowed = allowed_modules(TEXTS[page])
    for needed in READS.findall(block):
        made = run(guarded(first_example(page), allowed), folder, env)
        assert made.returncode == 0, made.stderr
        assert (folder / needed).exists(), f"the first example of {page} makes no {needed}"
    result = run(guarded(block, allowed), folder, env)
    assert result.returncode == 0, result.stderr
    if hub is not None:
        assert hub.hits, "the example never asked the loopback Hub"
        assert all(hit.status in (200, 206) for hit in hub.hits), hub.hits


# The Hub's names that stand for the reader's own (hf://org/model, hf://ORG/NAME).
PLACEHOLDER_ORGS = frozenset({"org", "your-org", "user", "username"})


@pytest.mark.parametrize("page", [page.stem for page in PAGES])
def test_a_placeholder_is_said_to_be_one(page: str) -> None:
    # An example that reads hf://org/model runs here against a loopback Hub, but a reader's
    # copy would ask the real Hub for a repository that is not there: the example says it
    # stands for theirs.
    for name, number, block in EXAMPLES:
        if name != page:
            continue
        for org, *_ in HUB_PATHS.findall(block):
            if org.lower() in PLACEHOLDER_ORGS:
                assert "placeholder" in block, (page, number, f"hf://{org}/...")


def test_the_guard_refuses_what_a_page_does_not_name(tmp_path: Path) -> None:
    # A page that names nothing: numpy is not importable by its example, or by
    # safetensors_header for it; a page that names the numpy extra: it is.
    nothing = allowed_modules("# A page\n\nNo install line.\n")
    numpy_named = allowed_modules("Needs `pip install 'safetensors_header[numpy]'`.")
    assert "numpy" not in nothing
    assert "numpy" in numpy_named
    block = "import numpy\n"
    env = untraced_environment()
    refused = run(guarded(block, nothing), tmp_path, env)
    assert refused.returncode != 0
    assert "No module named 'numpy': this page's pip install commands" in refused.stderr
    if importlib.util.find_spec("numpy") is not None:
        assert run(guarded(block, numpy_named), tmp_path, env).returncode == 0
    # Through the package: its numpy adapter imports numpy for the example.
    through = "from safetensors_header.numpy import load\n"
    assert run(guarded(through, nothing), tmp_path, env).returncode != 0
    # The standard library and the package itself always import.
    assert run(guarded("import json, safetensors_header\n", nothing), tmp_path, env).returncode == 0


def test_the_pages_name_what_they_install() -> None:
    extras, others = named_distributions(
        "```sh\npip install torch --index-url https://x/cpu  # CPU\npip install -e '.[s3]'\n```\n"
        "and `pip install\n'safetensors_header[jax]' safetensors`."
    )
    assert extras == {".", "s3", "jax"}
    assert others == {"torch", "safetensors"}


def test_no_example_reads_the_repository_s_test_files() -> None:
    for page, number, block in EXAMPLES:
        assert "tests/data" not in block, (page, number)


@pytest.mark.parametrize("page", [page.stem for page in PAGES])
def test_no_example_hard_codes_the_hub(page: str) -> None:
    # The Hub is where HF_ENDPOINT says (a mirror, a test server): an example names its
    # files hf://..., or reads HF_ENDPOINT.
    for name, number, block in EXAMPLES:
        if name == page:
            code = "\n".join(line.split("#")[0] for line in block.splitlines())
            assert "huggingface.co" not in code or "HF_ENDPOINT" in code, (page, number)


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_code_lines_fit_the_page(page: Path) -> None:
    # 88 characters fit a code block of the site beside its navigation on a 1,280-pixel
    # screen (docs/stylesheets/extra.css); a longer line scrolls sideways.
    # A fence inside a list item is indented, and its lines are shown without that indent.
    long = []
    inside, indent = False, 0
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        if line.lstrip().startswith("```"):
            inside, indent = not inside, len(line) - len(line.lstrip())
        elif inside and len(line) - indent > 88:
            long.append(f"{page.name}:{number}: {len(line) - indent} characters")
    assert not long


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_no_page_repeats_its_title_as_a_heading(page: Path) -> None:
    # The page's contents list its sections; one that is the title again says nothing.
    text = page.read_text()
    title = re.search(r"^# (.+)$", text, re.MULTILINE)
    assert title is not None
    words = title[1].split(":")[0].strip().lower().removeprefix("the ")
    for heading in re.findall(r"^## (.+)$", text, re.MULTILINE):
        assert not heading.lower().removeprefix("the ").startswith(words), heading


def test_the_readme_is_a_page_and_its_first_example_needs_only_the_package(
    tmp_path: Path,
) -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
    # -S: no site-packages, so nothing but the standard library and the package (on the path).
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    for block in (BLOCKS[0], first_example("getting-started")):
        result = subprocess.run(
            [sys.executable, "-S", "-c", block],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0] == "{'format': 'pt'}"
    assert os.listdir(tmp_path)  # they wrote their files here
