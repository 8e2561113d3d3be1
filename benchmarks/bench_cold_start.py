"""Time cold starts (a fresh process per run): the interpreter, the import, the command line.

    python benchmarks/bench_cold_start.py [--runs 30] [--as-is]

Three commands, each run in a fresh process, interleaved round-robin (so that drift hits
them alike), medians of ``--runs`` runs (at least 20), each with its ratio to the first:

* ``python -c pass``: the interpreter starting and stopping;
* ``python -c "import safetensors_header"``;
* ``python -m safetensors_header inspect tests/data/tiny.safetensors`` (output discarded).

Bytecode is cached as an installed package has it: every command is run once before timing,
so that the ``.pyc`` files of the package exist (checked, and said, in the output), and the
timed runs load them rather than compile the sources. The package imported is the one this
script imports (``PYTHONPATH`` is set to its parent folder in the child processes).

By default the commands run in a temporary virtual environment made from this interpreter
with ``venv`` (no pip, no site-packages of its own): an interpreter whose ``site`` runs but
no third-party ``.pth`` file does, so that neither the baseline nor the import list is
changed by whatever this machine's site-packages load at startup. ``--as-is`` runs this
interpreter itself instead (its ``.pth`` files listed in the output).

It then prints what ``import safetensors_header`` imports: the modules ``python -X importtime``
shows under it (in the same interpreter), as a tree with the self and cumulative import times
in microseconds (medians of ``--importtime-runs`` fresh processes), and flags the modules that
a cheap import should not need: typing, urllib, threading, random, ipaddress, argparse,
shutil, dataclasses, json, re (and their submodules).

Target: the ``inspect`` command at most 2.7x ``python -c pass``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import safetensors_header

FLAGGED = (
    "typing",
    "urllib",
    "threading",
    "random",
    "ipaddress",
    "argparse",
    "shutil",
    "dataclasses",
    "json",
    "re",
)
INSPECT_TARGET = 2.7  # the inspect command, as a multiple of `python -c pass`
TINY = Path(__file__).resolve().parent.parent / "tests" / "data" / "tiny.safetensors"
PACKAGE_PARENT = str(Path(safetensors_header.__file__ or ".").resolve().parent.parent)

_PYC_PROBE = """
import os, sys
before = set(sys.modules)
import safetensors_header
folder = os.path.dirname(safetensors_header.__file__)
ours = [m for m in sys.modules.values() if (getattr(m, "__file__", "") or "").startswith(folder)]
cached = [m for m in ours if m.__cached__ and os.path.exists(m.__cached__)]
print(len(cached), len(ours), sys.flags.dont_write_bytecode)
print(" ".join(sorted(set(sys.modules) - before)))
print(" ".join(sorted(before)))
print(folder)
"""


def child_env() -> dict[str, str]:
    """The environment of the timed processes: the package under test first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (PACKAGE_PARENT, env.get("PYTHONPATH"))))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode is cached, as when installed
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def commands(python: str) -> dict[str, list[str]]:
    return {
        "python -c pass": [python, "-c", "pass"],
        'python -c "import safetensors_header"': [python, "-c", "import safetensors_header"],
        "python -m safetensors_header inspect tests/data/tiny.safetensors": [
            python,
            "-m",
            "safetensors_header",
            "inspect",
            str(TINY),
        ],
    }


def run(command: list[str], env: dict[str, str]) -> float:
    """Seconds from spawning `command` to its exit; fails if it fails."""
    start = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def time_commands(python: str, runs: int, env: dict[str, str]) -> dict[str, float]:
    """Median seconds of each command over `runs` interleaved fresh processes."""
    todo = commands(python)
    for command in todo.values():  # once first: .pyc files written, page cache warm
        run(command, env)
    times: dict[str, list[float]] = {label: [] for label in todo}
    for _ in range(runs):
        for label, command in todo.items():
            times[label].append(run(command, env))
    return {label: statistics.median(values) for label, values in times.items()}


def import_tree(python: str, env: dict[str, str], runs: int) -> list[tuple[int, str, int, int]]:
    """What ``import safetensors_header`` imports: (depth, module, self us, cumulative us).

    From ``-X importtime``: a module's line comes after those of the modules it imported, at
    one level less of indentation, so the import's own modules are the lines after the last
    top-level line before ``safetensors_header``'s (the interpreter's startup imports).
    """
    samples: list[list[tuple[int, str, int, int]]] = []
    for _ in range(runs):
        out = subprocess.run(
            [python, "-X", "importtime", "-c", "import safetensors_header"],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        lines = []
        for line in out.stderr.splitlines():
            if not line.startswith("import time:") or "imported package" in line:
                continue
            own, cumulative, name = line.removeprefix("import time:").split("|")
            depth = (len(name) - len(name.lstrip()) - 1) // 2
            lines.append((depth, name.strip(), int(own), int(cumulative)))
        end = max(i for i, (depth, name, _, _) in enumerate(lines) if name == "safetensors_header")
        begin = max((i for i in range(end) if lines[i][0] == 0), default=-1) + 1
        samples.append(lines[begin : end + 1])
    first = samples[0]
    return [
        (
            depth,
            name,
            int(statistics.median(sample[i][2] for sample in samples)),
            int(statistics.median(sample[i][3] for sample in samples)),
        )
        for i, (depth, name, _, _) in enumerate(first)
    ]


def importer(tree: list[tuple[int, str, int, int]], index: int) -> str:
    """The module whose import imported ``tree[index]``: the next line one level up."""
    depth = tree[index][0]
    return next(name for level, name, _, _ in tree[index + 1 :] if level == depth - 1)


def flagged(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in FLAGGED)


def pth_files(python: str) -> list[str]:
    code = "import site, glob; print('\\n'.join(p for d in site.getsitepackages() for p in glob.glob(d + '/*.pth')))"  # noqa: E501
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per command (at least 20)")
    parser.add_argument("--importtime-runs", type=int, default=5)
    parser.add_argument("--as-is", action="store_true", help="this interpreter, not a venv")
    args = parser.parse_args()
    if args.runs < 20:
        parser.error("--runs must be at least 20")
    started, load_at_start = time.perf_counter(), os.getloadavg()[0]
    env = child_env()
    with tempfile.TemporaryDirectory() as folder:
        if args.as_is:
            python, where = sys.executable, f"{sys.executable} as is"
        else:
            venv.create(folder, with_pip=False, symlinks=os.name != "nt")
            python = str(Path(folder) / "bin" / "python")
            where = f"a fresh venv of {sys.executable}"
        print(
            f"Python {sys.version.split()[0]}, {where}, {os.cpu_count()} cores; "
            f"safetensors_header {safetensors_header.__version__} from {PACKAGE_PARENT}"
        )
        pths = pth_files(python)
        print(f".pth files run at startup: {', '.join(map(os.path.basename, pths)) or 'none'}")
        medians = time_commands(python, args.runs, env)
        probe = subprocess.run(
            [python, "-c", _PYC_PROBE], env=env, capture_output=True, text=True, check=True
        )
        counts, new_modules, startup_modules, child_package = probe.stdout.splitlines()
        cached, modules, no_bytecode = map(int, counts.split())
        loaded, at_startup = set(new_modules.split()), set(startup_modules.split())
        if Path(child_package).resolve() != Path(PACKAGE_PARENT) / "safetensors_header":
            raise SystemExit(f"the timed processes import {child_package}, not this package")
        print(
            f"bytecode: each command run once before timing; {cached} of the {modules} "
            f"package modules imported have their .pyc"
            + (" (sys.dont_write_bytecode is set!)" if no_bytecode else "")
        )
        print(f"medians of {args.runs} interleaved runs, a fresh process each")
        print()
        base = medians["python -c pass"]
        print("| command | median ms | vs python -c pass | target |")
        print("|---|---:|---:|---|")
        for label, seconds in medians.items():
            target = "-"
            if "inspect" in label:
                met = "met" if seconds / base <= INSPECT_TARGET else "NOT met"
                target = f"<= {INSPECT_TARGET:g}x: {met}"
            print(f"| `{label}` | {seconds * 1e3:.1f} | {seconds / base:.2f}x | {target} |")
        print()
        tree = import_tree(python, env, args.importtime_runs)
        found = [name for _, name, _, _ in tree if name in loaded]
        print(
            f"`import safetensors_header` imports {len(found)} modules, as listed by python "
            f"-X importtime (sys.modules grows by {len(loaded)}, counting aliases such as "
            f"typing.io); medians of {args.importtime_runs} runs, in us; * = flagged, "
            f"? = looked for, not found:"
        )
        print()
        print(f"{'self':>7} {'cumul.':>7}  module")
        for depth, name, own, cumulative in tree:
            mark = "  *" if flagged(name) else "  ?" if name not in loaded else ""
            print(f"{own:7} {cumulative:7}  {'  ' * depth}{name}{mark}")
        hits = [  # a package's own submodules are not listed again
            f"{name} (by {by})"
            for i, (_, name, _, _) in enumerate(tree)
            if flagged(name) and name in loaded
            if (by := importer(tree, i)).split(".")[0] != name.split(".")[0]
        ]
        print()
        print(f"flagged among them: {', '.join(hits) or 'none'}")
        top = {name.split(".")[0] for name in found}
        before = [name for name in FLAGGED if name in at_startup]
        print(f"flagged, already imported at startup: {', '.join(before) or 'none'}")
        rest = [name for name in FLAGGED if name not in top and name not in at_startup]
        print(f"flagged and not imported: {', '.join(rest) or 'none'}")
    print(
        f"({time.perf_counter() - started:.0f} s; 1-minute load average "
        f"{load_at_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
