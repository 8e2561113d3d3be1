"""docs/format.md and the tests agree: every test it cites exists, every rule case is cited.

The document is the specification; each numbered rule lists the pytest node ids that pin it.
These tests fail when a cited test is renamed or removed, when a case of the rule table
(tests/test_rules.py) is added without being cited in the section it names, and when a rule
loses its test list or its ``implemented by:`` line.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers import untraced_environment
from test_rules import RULES

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "format.md"

_TOP = re.compile(r"^## (\d+)\. \S", re.MULTILINE)
_RULE = re.compile(r"^### (\d+)\.(\d+) \S", re.MULTILINE)
_ANCHOR = re.compile(r'^<a id="s([\d.]+)"></a>$', re.MULTILINE)
_CITED = re.compile(r"`(tests/[\w/]+\.py::[^`]+)`")
_IMPLEMENTED = re.compile(r"^implemented by: (.+)$", re.MULTILINE)
_LINK = re.compile(r"\]\(#s([\d.]+)\)")


class Section(NamedTuple):
    number: str  # "3.4"
    text: str  # from its heading to the next heading


def rule_sections(text: str) -> list[Section]:
    """The numbered rules (### n.m), each with its text up to the next heading."""
    starts = [(m.start(), f"{m.group(1)}.{m.group(2)}") for m in _RULE.finditer(text)]
    ends = sorted(m.start() for m in re.finditer(r"^#{1,3} ", text, re.MULTILINE))
    sections = []
    for start, number in starts:
        end = next((e for e in ends if e > start), len(text))
        sections.append(Section(number, text[start:end]))
    return sections


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def sections(doc: str) -> list[Section]:
    found = rule_sections(doc)
    assert len(found) > 40, "the rule headings (### n.m Title) were not found"
    return found


@pytest.fixture(scope="module")
def collected(doc: str, collected_ids: frozenset[str]) -> set[str]:
    """The node ids pytest collects from the test files the document cites."""
    cited = set(_CITED.findall(doc))
    files = sorted({node.split("::", 1)[0] for node in cited})
    missing = [name for name in files if not (ROOT / name).is_file()]
    assert not missing, f"docs/format.md cites test files that do not exist: {missing}"
    # This run's own collection, when it holds every cited test and every rule's case (the
    # suite's does): a second collection in a child costs seconds. Else (a part of the suite,
    # or a cited test missing) the child collects the cited files whole, to be sure.
    here = {node for node in collected_ids if node.split("::", 1)[0] in files}
    rule_cases = {f"tests/test_rules.py::test_rule[{rule.id}]" for rule in RULES}
    if rule_cases <= here and all(exists(node, here) for node in cited):
        return here
    result = subprocess.run(
        # (-n 0: collected here, not by worker processes that xdist would start for it)
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            *files,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=untraced_environment(),  # collecting tests, not running the package's code
    )
    assert result.returncode == 0, result.stdout + result.stderr
    ids = {line for line in result.stdout.splitlines() if "::" in line}
    assert len(ids) > len(RULES), "collection found too few tests"
    return ids


def exists(cited: str, collected: set[str]) -> bool:
    """A node id, or a test function's id standing for all its parameters."""
    return cited in collected or any(node.startswith(cited + "[") for node in collected)


def test_every_cited_test_exists(doc: str, collected: set[str]) -> None:
    cited = _CITED.findall(doc)
    assert cited
    unknown = sorted({node for node in cited if not exists(node, collected)})
    assert not unknown, f"docs/format.md cites tests that pytest does not collect: {unknown}"


def test_every_rule_case_is_cited_in_its_section(sections: list[Section]) -> None:
    cited_in = {section.number: set(_CITED.findall(section.text)) for section in sections}
    problems = []
    for rule in RULES:
        node = f"tests/test_rules.py::test_rule[{rule.id}]"
        if rule.section not in cited_in:
            problems.append(f"{rule.id}: no section {rule.section} in docs/format.md")
        elif node not in cited_in[rule.section]:
            elsewhere = sorted(n for n, ids in cited_in.items() if node in ids)
            problems.append(f"{rule.id}: not cited in §{rule.section} (cited in: {elsewhere})")
    assert not problems, "\n".join(problems)


def test_the_rule_cases_are_collected_under_their_ids(collected: set[str]) -> None:
    # An id pytest would escape (non-ASCII, a backslash) could not be cited as written.
    for rule in RULES:
        assert f"tests/test_rules.py::test_rule[{rule.id}]" in collected, rule.id


def test_every_rule_lists_its_tests_and_its_implementation(sections: list[Section]) -> None:
    for section in sections:
        assert _CITED.search(section.text), f"§{section.number} cites no test"
        implemented = _IMPLEMENTED.findall(section.text)
        assert len(implemented) == 1, f"§{section.number}: one 'implemented by:' line"


def test_numbering_and_anchors(doc: str, sections: list[Section]) -> None:
    tops = [m.group(1) for m in _TOP.finditer(doc)]
    assert tops == [str(n) for n in range(1, len(tops) + 1)], "top sections 1, 2, 3, ..."
    numbers = [section.number for section in sections]
    expected = []
    for top in tops:
        count = sum(1 for number in numbers if number.split(".")[0] == top)
        assert count, f"§{top} holds no rule"
        expected += [f"{top}.{n}" for n in range(1, count + 1)]
    assert numbers == expected, "rules numbered n.1, n.2, ... in order, under their section"
    # Each heading has its stable anchor right above it, and every link points to one.
    anchors = _ANCHOR.findall(doc)
    assert sorted(anchors) == sorted([*tops, *numbers]), "one anchor per section"
    headings = [(m.start(), m.group(1)) for m in _TOP.finditer(doc)]
    headings += [(m.start(), f"{m.group(1)}.{m.group(2)}") for m in _RULE.finditer(doc)]
    for start, number in headings:
        above = doc[:start].rstrip("\n").rsplit("\n", 1)[-1]
        assert above == f'<a id="s{number}"></a>', f"§{number}: its anchor is not above it"
    dangling = sorted(set(_LINK.findall(doc)) - set(anchors))
    assert not dangling, f"links to missing anchors: {dangling}"


def test_sections_named_by_the_table_exist(sections: list[Section]) -> None:
    numbers = {section.number for section in sections}
    assert {rule.section for rule in RULES} <= numbers


_NAMED = re.compile(r"`(_?\w+(?:\.\w+)*)\.(\w+)`")  # `module.name`, `package.module.name`


def test_every_implementing_function_exists(doc: str) -> None:
    """Each `module.name` on an "implemented by" line is a name in that package module."""
    import importlib

    named = [match for line in _IMPLEMENTED.findall(doc) for match in _NAMED.findall(line)]
    assert len(named) >= 55
    missing = []
    for module, name in named:
        try:
            found = importlib.import_module(f"safetensors_header.{module}")
        except ImportError:
            missing.append(f"{module}.{name}")
            continue
        if not hasattr(found, name):
            missing.append(f"{module}.{name}")
    assert not missing, f"docs/format.md names functions that do not exist: {missing}"
    assert "TBD" not in "".join(_IMPLEMENTED.findall(doc))
