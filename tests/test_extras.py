"""An optional library that is not installed: each adapter's import of it fails with a
`ModuleNotFoundError` that names the extra to install and the Python that extra needs.

Each case runs in a new interpreter in which a meta-path finder refuses the hidden modules,
as an environment without them would.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import untraced_environment

from safetensors_header import _extras
from safetensors_header._extras import EXTRAS, install_hint, missing

ROOT = Path(__file__).resolve().parent.parent

# Runs the code of argv[2] with the modules of argv[1] (comma-separated) unimportable; those
# imported already (a dependency imported them) are forgotten first.
_HIDING = textwrap.dedent(
    """
    import sys

    hidden = set(sys.argv[1].split(","))


    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in hidden:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)


    before, _, after = sys.argv[2].rpartition("# hide\\n")
    exec(before)
    for name in [name for name in sys.modules if name.split(".")[0] in hidden]:
        del sys.modules[name]
    sys.meta_path.insert(0, Refuse())
    exec(after)
    """
)


def _error_without(hidden: str, code: str) -> str:
    """The last line of the traceback of `code` run with `hidden` unimportable."""
    done = subprocess.run(
        [sys.executable, "-c", _HIDING, hidden, code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=untraced_environment(),
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    return done.stderr.strip().splitlines()[-1]


# (hidden module, code (what is before "# hide" runs before it is hidden), what needs it, extra)
CASES = [
    pytest.param(
        "numpy",
        "import safetensors_header.numpy",
        "safetensors_header.numpy",
        "numpy",
        id="numpy",
    ),
    pytest.param(
        "ml_dtypes",
        "import numpy\nfrom safetensors_header.numpy import numpy_dtype\nnumpy_dtype('BF16')",
        "dtype BF16",
        "ml-dtypes",
        id="numpy-ml_dtypes",
    ),
    pytest.param(
        "numpy",
        "from safetensors_header.zarr import read_tensors\n"
        "class Array:\n    attrs = {}\n    def __getitem__(self, key): return [1.0]\n"
        "class Group:\n    def arrays(self): return [('t', Array())]\n"
        "read_tensors(Group())",
        "safetensors_header.zarr.read_tensors",
        "numpy",
        id="zarr-numpy",
    ),
    pytest.param(
        "ml_dtypes",
        "import numpy\nfrom safetensors_header.zarr import _real_dtype\n_real_dtype([1], 'BF16')",
        "reading a BF16 tensor",
        "ml-dtypes",
        id="zarr-ml_dtypes",
    ),
    pytest.param(
        "awkward",
        "import safetensors_header.awkward",
        "safetensors_header.awkward",
        "awkward",
        id="awkward",
    ),
    pytest.param(
        "numpy",
        "import safetensors_header.awkward",
        "safetensors_header.awkward",
        "awkward",
        id="awkward-numpy",
    ),
    pytest.param(
        "fsspec",
        "import awkward as ak\nfrom safetensors_header.awkward import to_safetensors\n# hide\n"
        "to_safetensors(ak.Array([1, 2]), 'memory://x.safetensors')",
        "writing to an fsspec URL",
        "fsspec",
        id="awkward-fsspec",
    ),
    pytest.param(
        "obspec_utils",
        "import safetensors_header.virtualizarr",
        "safetensors_header.virtualizarr",
        "virtualizarr",
        id="virtualizarr-obspec_utils",
    ),
    pytest.param(
        "virtualizarr",
        "import safetensors_header.virtualizarr",
        "safetensors_header.virtualizarr",
        "virtualizarr",
        id="virtualizarr",
    ),
    pytest.param(
        "icechunk",
        "import safetensors_header.icechunk",
        "safetensors_header.icechunk",
        "icechunk",
        id="icechunk",
    ),
    pytest.param(
        "xarray",
        "import safetensors_header.icechunk",
        "safetensors_header.icechunk",
        "icechunk",
        id="icechunk-xarray",
    ),
    pytest.param(
        "torch", "import safetensors_header.torch", "safetensors_header.torch", "torch", id="torch"
    ),
    pytest.param("jax", "import safetensors_header.jax", "safetensors_header.jax", "jax", id="jax"),
    *(
        pytest.param(
            hidden,
            f"import safetensors_header._compat.{extra}",
            f"safetensors_header._compat.{extra}",
            extra,
            id=f"compat-{extra}",
        )
        for hidden, extra in (("tensorflow", "tensorflow"), ("paddle", "paddle"), ("mlx", "mlx"))
    ),
]


@pytest.mark.parametrize(("hidden", "code", "who", "extra"), CASES)
def test_a_missing_library_names_the_extra_and_the_python(
    hidden: str, code: str, who: str, extra: str
) -> None:
    for module in re.findall(r"^import (\w+)", code, re.MULTILINE):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed: the case needs it")
    error = _error_without(hidden, code)
    said = re.match(rf"(ModuleNotFoundError|TypeError): {re.escape(who)} needs (\w+)", error)
    assert said, error
    # The hidden module, or one missing here that the extra installs (on Python 3.10 the
    # virtualizarr extra installs nothing: obspec_utils is the first import that fails).
    assert said[2] == hidden or importlib.util.find_spec(said[2]) is None, error
    major, minor = EXTRAS[extra]
    assert f"pip install 'safetensors_header[{extra}]' (Python {major}.{minor}+" in error
    if sys.version_info < (major, minor):
        assert f"this is Python {sys.version_info.major}.{sys.version_info.minor}" in error


def test_an_older_python_is_said_to_be_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_extras.sys, "version_info", (3, 11, 7, "final", 0))
    assert install_hint("icechunk") == (
        "pip install 'safetensors_header[icechunk]' (Python 3.12+; this is Python 3.11, "
        "where the extra leaves it out)"
    )
    monkeypatch.setattr(_extras.sys, "version_info", (3, 12, 1, "final", 0))
    assert install_hint("icechunk") == "pip install 'safetensors_header[icechunk]' (Python 3.12+)"
    error = missing(
        ModuleNotFoundError("No module named 'icechunk'", name="icechunk"), "icechunk", "x"
    )
    assert (str(error), error.name) == (
        "x needs icechunk, which is not installed: pip install 'safetensors_header[icechunk]' "
        "(Python 3.12+)",
        "icechunk",
    )


def _marker_pythons() -> dict[str, tuple[int, int]]:
    """Each extra of pyproject.toml -> the newest Python its markers ask of a library in it
    (3.10, the package's own floor, when none asks)."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]")[1].split("\n[")[0]
    extras: dict[str, tuple[int, int]] = {}
    lists = re.findall(r"^([\w-]+) = \[(.*?)\]\s*(?:#[^\n]*)?$", section, re.MULTILINE | re.DOTALL)
    for name, body in lists:
        floors = [
            (int(major), int(minor))
            for major, minor in re.findall(r"python_version >= '(\d+)\.(\d+)'", body)
        ]
        extras[name] = max(floors, default=(3, 10))
    return extras


def test_the_table_of_extras_is_the_markers_of_pyproject() -> None:
    found = _marker_pythons()
    assert {"numpy", "icechunk", "virtualizarr"} <= set(found)  # the parse found them
    extras = {name: found[name] for name in found if name not in {"test", "docs", "dev"}}
    assert extras == EXTRAS, "an extra and its Python go in safetensors_header/_extras.py too"
