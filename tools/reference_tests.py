"""Run the reference's own Python tests on the reference, then through the alias.

    python tools/reference_tests.py CHECKOUT [pytest arguments...]

CHECKOUT is a checkout of huggingface/safetensors (or its ``bindings/python``); its
``tests`` are run twice, from that folder (they write their files under ``tests/data``):
once as they are, on the installed ``safetensors`` package, and once with a plugin that calls
``safetensors_header.install_as_safetensors()`` before they import anything, so that their
``import safetensors`` is this project. The counts are printed by file, and every test that
passes on the reference but not through the alias is named. The exit status is 1 when one
does that docs/coming-from-safetensors.md does not name among its exceptions.

Nothing of the reference's tests is kept in this repository: they are read from CHECKOUT.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = """import safetensors_header

safetensors_header.install_as_safetensors()


def pytest_report_header(config):
    import safetensors

    return f"safetensors is {safetensors.__name__} ({safetensors.__file__})"
"""
# The tests that pass on the reference and may fail through the alias: each is named, with
# its reason, in docs/coming-from-safetensors.md ("The reference's own tests").
EXCEPTIONS: frozenset[str] = frozenset()


def _outcomes(folder: Path, alias: bool, arguments: list[str]) -> dict[str, str]:
    """Each test's outcome (passed, failed, skipped, error), by ``file::name``."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.xml"
        environment = dict(os.environ)
        paths = [str(ROOT)]
        if alias:
            (Path(scratch) / "safetensors_header_alias.py").write_text(PLUGIN)
            paths.insert(0, scratch)
        environment["PYTHONPATH"] = os.pathsep.join(
            [*paths, *filter(None, [environment.get("PYTHONPATH")])]
        )
        command = [sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"]
        command += ["--junitxml", str(report), "-o", "junit_family=xunit1", *arguments]
        if alias:
            command += ["-p", "safetensors_header_alias"]
        subprocess.run(command, cwd=folder, env=environment, check=False)
        outcomes = {}
        for case in ET.parse(report).iter("testcase"):
            file = Path(case.get("file") or case.get("classname", "").replace(".", "/")).name
            name = f"{file}::{case.get('name')}"
            kinds = {child.tag for child in case}
            outcome = "passed"
            for kind in ("skipped", "failure", "error"):
                if kind in kinds:
                    outcome = {"failure": "failed"}.get(kind, kind)
            outcomes[name] = outcome
        return outcomes


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    folder = Path(argv[0])
    if (folder / "bindings" / "python").is_dir():
        folder = folder / "bindings" / "python"
    reference = _outcomes(folder, False, argv[1:])
    alias = _outcomes(folder, True, argv[1:])
    files = sorted({name.split("::")[0] for name in reference} | {n.split("::")[0] for n in alias})
    print(f"{'file':32} {'reference passed':>16} {'alias passed':>12} {'skipped':>8}")
    for file in files:
        here = Counter(o for n, o in reference.items() if n.startswith(file + "::"))
        there = Counter(o for n, o in alias.items() if n.startswith(file + "::"))
        print(f"{file:32} {here['passed']:>16} {there['passed']:>12} {here['skipped']:>8}")
    total = Counter(reference.values()), Counter(alias.values())
    print(f"{'total':32} {total[0]['passed']:>16} {total[1]['passed']:>12}")
    lost = sorted(n for n, o in reference.items() if o == "passed" and alias.get(n) != "passed")
    for name in lost:
        print(f"passes on the reference, not through the alias: {name} ({alias.get(name)})")
    unexplained = [name for name in lost if name not in EXCEPTIONS]
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
