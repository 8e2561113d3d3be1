"""The Python examples of the README and the docs pages run as written (those that need no
network or model files)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import untraced_environment

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = [
    (page.stem, block)
    for page in PAGES
    for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL)
]
BLOCKS = [block for page, block in EXAMPLES if page == "README"]
# Examples that need what a test machine does not have: the network, a real checkpoint.
ELSEWHERE = ('"https://', "Llama-3-8B/", '"s3://', '"hf://', '"http://')  # not here
NEEDS = ("zarr", "fsspec", "virtualizarr", "numpy", "icechunk", "dask", "awkward", "obstore")


def test_the_readme_and_the_site_have_examples() -> None:
    assert len(BLOCKS) >= 3
    assert len(EXAMPLES) >= 20


def runnable() -> list[object]:
    cases = []
    numbers: dict[str, int] = {}
    for page, block in EXAMPLES:
        numbers[page] = number = numbers.get(page, 0) + 1
        reason = next((f"needs {word}" for word in ELSEWHERE if word in block), None)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        name = "block" if page == "README" else page
        cases.append(pytest.param(block, id=f"{name}-{number}", marks=marks))
    return cases


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding tests/data/tiny.safetensors, where the examples run in order."""
    where = tmp_path_factory.mktemp("readme")
    (where / "tests" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "tiny.safetensors", where / "tests" / "data")
    return where


@pytest.mark.parametrize("block", runnable())
def test_example_runs(block: str, workdir: Path) -> None:
    for module in NEEDS:
        imported = re.search(rf"^\s*(from|import) {module}\b", block, re.MULTILINE)
        if imported and importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    # The examples run as a user runs them, untraced by coverage: they teach, the tests cover.
    untraced = untraced_environment()
    if '"model.safetensors"' in block and not (workdir / "model.safetensors").exists():
        # Some pages' examples read the file the writing page's example makes.
        writing = next(b for _, b in EXAMPLES if "write_file(" in b and '"model.safetensors"' in b)
        subprocess.run(
            [sys.executable, "-c", writing], cwd=workdir, check=True, timeout=60, env=untraced
        )
    result = subprocess.run(
        [sys.executable, "-c", block],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=untraced,
    )
    assert result.returncode == 0, result.stderr


def test_the_readme_is_a_page_and_its_first_example_needs_only_the_package(
    tmp_path: Path,
) -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
    # -S: no site-packages, so nothing but the standard library and the package (on the path).
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-S", "-c", BLOCKS[0]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "{'format': 'pt'}"
