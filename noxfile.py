"""The test matrix: every supported CPython, the oldest and the newest optional libraries, lint.

    nox -s tests            # tests on 3.10, 3.11, 3.12 and 3.13
    nox -s tests-3.13       # one of them; 3.13 is the main session (README command + coverage)
    nox -s oldest           # the lowest versions pyproject.toml allows, all together
    nox -s lint             # mypy --strict, ruff check, ruff format --check
    nox -s torch jax        # the torch adapter (torch 2.13.0, Python 3.11), the JAX one (3.12)
    nox -s frameworks       # the reference's TensorFlow, PaddlePaddle and MLX modules (3.11)

Interpreters are found on PATH as ``python3.X``; pyenv's versions are put there first, so that
nox needs no ``pyenv init`` and never runs a pyenv shim (which fails for a version that is not
the shell's ``pyenv global``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nox
from packaging.requirements import Requirement

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
# The README's test command and the coverage gates run here: the newest Python, with the newest
# release of every library (a fresh venv's pip picks them), every extra installed, so that
# every module of the package is measured.
MAIN = PYTHONS[-1]
OLDEST_PYTHON = "3.12"  # the oldest Python on which every extra installs (icechunk 2 needs 3.12)
PROJECT = "safetensors_header"

# Printed by every test session, so that a log says what was tested against.
REPORTED = [
    "numpy",
    "ml_dtypes",
    "zarr",
    "fsspec",
    "virtualizarr",
    "icechunk",
    "dask",
    "distributed",
    "obstore",
    "obspec_utils",
    "s3fs",
    "moto",
    "xarray",
    "numcodecs",
    "tensorstore",
    "awkward",
    "awkward_cpp",
    "torch",
    "jax",
    "jaxlib",
    "transformers",
    "diffusers",
    "tensorflow",
    "tensorflow_cpu",
    "paddlepaddle",
    "mlx",
    "mlx_cpu",
    "safetensors",
    "pytest",
    "pytest_cov",
    "coverage",
    "hypothesis",
]


# The suite on every core, an idle worker taking queued tests from a busy one (pytest-xdist).
EVERY_CORE = ["-n", "auto", "--dist", "worksteal"]
# The tests marked slow (stress runs, large files, many processes) run in the main session;
# the others leave them out.
QUICK = ["-m", "not slow"]
# The docs pages' examples (each a fresh process that imports its libraries) run in the main
# session (the newest libraries) and against the oldest ones, where an API they call may
# differ; the other sessions leave them out (the README's run everywhere).
QUICK_WITHOUT_DOCS = ["-m", "not slow and not docs"]

# A child process that imports numpy, zarr and xarray compiles them again (5 s, against 1.4 s
# with their bytecode cached) when PYTHONDONTWRITEBYTECODE is set, as some shells and CI
# machines set it: uv installs no bytecode, and the suite starts a few hundred such processes
# (its examples, its command-line tests, its workers). The sessions let Python cache it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The reference's modules of these frameworks (safetensors_header._compat), each tested in an
# environment of its own (nox -s frameworks): they pin numpy differently, and none is in the
# others' sessions.
FRAMEWORKS = ["tensorflow", "paddle", "mlx"]
# The modules measured in the torch, jax and frameworks sessions, not in the main one.
ELSEWHERE = ["torch", "jax", "_compat/torch", "_compat/flax", "_compat/_over_numpy"]
ELSEWHERE += [f"_compat/{name}" for name in FRAMEWORKS]

nox.needs_version = ">=2025.10.14"  # nox.options.download_python
nox.options.sessions = ["tests", "oldest", "lint", "docs", "torch", "jax", "frameworks"]
# uv makes a venv and installs the test extra in about 1 s where pip takes about 20 s.
nox.options.default_venv_backend = "uv"
nox.options.download_python = "never"  # use the interpreters on this machine, fetch none


def _put_pyenv_versions_on_path() -> None:
    """Prepend the newest pyenv build of each supported minor version to PATH."""
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found: list[str] = []
    for minor in PYTHONS:
        builds = [
            path
            for path in versions.glob(f"{minor}.*")
            if re.fullmatch(rf"{re.escape(minor)}\.\d+", path.name) and (path / "bin").is_dir()
        ]
        if builds:
            newest = max(builds, key=lambda path: int(path.name.rsplit(".", 1)[1]))
            found.append(str(newest / "bin"))
    if found:
        os.environ["PATH"] = os.pathsep.join([*found, os.environ.get("PATH", "")])


_put_pyenv_versions_on_path()


def _own_coverage_file(session: nox.Session) -> None:
    """Keep the session's coverage data in its own folder: sessions that measure coverage run
    at once in one checkout (CI's lanes), and pytest-cov erases the data files of the one it
    finds at its start, children's it has not combined yet among them."""
    # (The venv's folder: `session.create_tmp()` would also move the tests' TMPDIR.)
    session.env["COVERAGE_FILE"] = str(Path(session.virtualenv.location) / ".coverage")


def _report_versions(session: nox.Session) -> None:
    """Print the interpreter's version and those of REPORTED that are installed."""
    code = (
        "import importlib.metadata as m, platform, sys; wanted = set(sys.argv[1:]); "
        "print('Python', platform.python_version(), *sorted(f'{d.name}=={d.version}' "
        "for d in m.distributions() if d.name.lower().replace('-', '_') in wanted))"
    )
    session.run("python", "-c", code, *REPORTED)


def _lower_bounds() -> list[str]:
    """``name==X`` for every ``name>=X`` in the extras but `dev` (the linters), markers kept;
    an upper bound alone (``boto3 <X``) is left to the extra."""
    extras = nox.project.load_toml("pyproject.toml")["project"]["optional-dependencies"]
    pins: dict[str, str] = {}
    for extra, requirements in extras.items():
        if extra in ("dev", "docs"):  # the tools, not the libraries the package works with
            continue
        if extra in FRAMEWORKS or extra in ("torch", "jax"):  # each in a session of its own
            continue
        for text in requirements:
            requirement = Requirement(text)
            if requirement.name == PROJECT:  # another extra, read on its own
                continue
            specs = list(requirement.specifier)
            if specs and all(spec.operator in ("<", "<=") for spec in specs):
                continue  # a bound for the resolver (boto3's), no floor to test
            if len(specs) != 1 or specs[0].operator not in {">=", "=="}:
                raise ValueError(f"{text!r}: want one lower bound (>=) or one pin (==)")
            pin = f"{requirement.name}=={specs[0].version}"
            if requirement.marker is not None:
                pin += f" ; {requirement.marker}"
            name = requirement.name.lower().replace("_", "-")
            if pins.setdefault(name, pin) != pin:
                raise ValueError(f"{name}: the extras disagree on its lower bound")
    return sorted(pins.values())


@nox.session(python=PYTHONS, venv_params=["--seed"])
def tests(session: nox.Session) -> None:
    """The suite; on the main Python, exactly the README's test command plus the coverage gate."""
    if session.python == MAIN:
        _own_coverage_file(session)
        # The README's "Set-up" command, word for word (the venv is seeded with pip for it).
        session.run("python", "-m", "pip", "install", "-e", ".[test]")
        _report_versions(session)
        session.run("python", "-m", "pytest", "-n", "auto", "--cov", *session.posargs)
        if session.posargs:  # a part of the suite cannot cover the whole core
            session.log("coverage gate skipped: pytest was given arguments")
            return
        # Branch coverage: the whole package at 95 % or more, the parser (the core's reading
        # of a header) at 100 %, and the command line (tested in subprocesses) at 90 %: that
        # fails if they are no longer measured. (The modules of torch, JAX and the other
        # frameworks, and their namesakes of the reference's API, are measured in their own
        # sessions.)
        parser = ",".join(
            f"safetensors_header/_core/{name}.py"
            for name in ("parse", "rules", "columns", "canonical", "compact", "json_reader")
        )
        for include, floor in (
            ("safetensors_header/*", "95"),
            (parser, "100"),
            ("safetensors_header/_cli/*", "90"),
        ):
            session.run(
                "python",
                "-m",
                "coverage",
                "report",
                f"--include={include}",
                "--omit=" + ",".join(f"safetensors_header/{name}.py" for name in ELSEWHERE),
                f"--fail-under={floor}",
                "--precision=1",
            )
    else:
        session.install("-e", ".[test]")
        _report_versions(session)
        session.run("python", "-m", "pytest", *EVERY_CORE, *QUICK_WITHOUT_DOCS, *session.posargs)


@nox.session(python=OLDEST_PYTHON)
def oldest(session: nox.Session) -> None:
    """The lowest version of every library that the extras allow, all together."""
    session.install("-e", ".[test]", *_lower_bounds())
    _report_versions(session)
    session.run("python", "-m", "pytest", *EVERY_CORE, *QUICK, *session.posargs)


@nox.session(python=MAIN)
def lint(session: nox.Session) -> None:
    """mypy --strict (against the optional libraries' types), ruff check, ruff format --check."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "mypy", "--strict", PROJECT)
    session.run("python", "-m", "ruff", "check", ".")
    session.run("python", "-m", "ruff", "format", "--check", ".")


@nox.session(python=MAIN)
def docs(session: nox.Session) -> None:
    """The documentation site, built in strict mode: a broken link, anchor or API reference
    fails it; then tests/test_site.py reads the pages as built (Markdown that did not render,
    doctest directives, signatures that scroll). (Its Python examples run in the tests, with
    the README's.)"""
    session.install("-e", ".[docs]", "pytest >=8.0", "pytest-timeout >=2.2")
    site = Path(session.create_tmp()) / "site"
    session.run(
        "python",
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "--site-dir",
        str(site),
        env={"NO_MKDOCS_2_WARNING": "1"},
    )
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/test_site.py",
        *session.posargs,
        env={"SAFETENSORS_HEADER_SITE": str(site)},
    )


@nox.session(python="3.11", venv_params=["--seed"])
def torch(session: nox.Session) -> None:
    """safetensors_header.torch against torch 2.13.0 and the reference, with its coverage.

    PyPI's torch for Linux is a CUDA build of several GB; this machine keeps the CPU build in
    the folder PIP_FIND_LINKS names, where pip looks and uv does not: uv is shown it (about
    1 s from its cache, where pip takes 25 s to unpack torch). Without that variable, pip
    installs torch, as its own settings say. Only the tests that import torch run (and the
    docs' torch examples), in one process: the other sessions run the rest.
    """
    links = os.environ.get("PIP_FIND_LINKS", "").split()
    if not links:
        session.run("python", "-m", "pip", "install", "--quiet", "torch==2.13.0")
    # transformers and diffusers (no torch of their own) for the alias's tests with real
    # models: 26 s with pip, a few with uv.
    session.install(
        *(f"--find-links={link}" for link in links),
        "-e",
        ".[test,torch]",
        "transformers",
        "diffusers",
    )
    _report_versions(session)
    _run_and_cover(
        session,
        "torch",
        "tests/test_torch.py",
        "tests/test_compat_torch.py",
        "tests/test_compat_torch_transformers.py",
        "tests/test_compat_review.py",
        "tests/test_readme.py",
        modules=["torch.py", "_compat/torch.py"],
    )


@nox.session(python="3.12")
def jax(session: nox.Session) -> None:
    """safetensors_header.jax against JAX and the reference (safetensors.flax), with its
    coverage; only the tests that import JAX (and the docs' JAX examples)."""
    session.install("-e", ".[test,jax]")
    _report_versions(session)
    _run_and_cover(
        session,
        "jax",
        "tests/test_jax.py",
        "tests/test_compat_jax.py",
        "tests/test_readme.py",
        modules=["jax.py", "_compat/flax.py"],
    )


@nox.session(python="3.11")
@nox.parametrize("framework", FRAMEWORKS, ids=FRAMEWORKS)
def frameworks(session: nox.Session, framework: str) -> None:
    """The reference's module of `framework` (safetensors_header._compat) against the
    reference's own, with its coverage and that of what the three share; only its tests."""
    session.install("-e", f".[test,{framework}]")
    _report_versions(session)
    _run_and_cover(
        session,
        framework,
        "tests/test_compat_frameworks.py",
        modules=[f"_compat/{framework}.py", "_compat/_over_numpy.py"],
    )


def _run_and_cover(
    session: nox.Session, name: str, *tests: str, modules: list[str] | None = None
) -> None:
    """The tests of `tests` whose names say `name` (the module's tests and its docs page's
    examples), then the branch coverage of `modules` (default: the module `name`): 95 % or
    more."""
    _own_coverage_file(session)
    session.run(
        "python",
        "-m",
        "pytest",
        "--cov",
        "--cov-report=",
        *tests,
        "-k",
        name,
        "-n",
        "0",  # a process that imports its framework once: half the CPU time of two workers
        *session.posargs,
    )
    covered = [f"safetensors_header/{module}" for module in modules or [f"{name}.py"]]
    session.run(
        "python",
        "-m",
        "coverage",
        "report",
        f"--include={','.join(covered)}",
        "--fail-under=95",
        "--precision=1",
    )
