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
    for needed in READS.findall(block):
        made = run(first_example(page), folder, env)
        assert made.returncode == 0, made.stderr
        assert (folder / needed).exists(), f"the first example of {page} makes no {needed}"
    result = run(block, folder, env)
    assert result.returncode == 0, result.stderr
    if hub is not None:
        assert hub.hits, "the example never asked the loopback Hub"
        assert all(hit.status in (200, 206) for hit in hub.hits), hub.hits


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
