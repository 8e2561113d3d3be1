"""The documentation site as built: what a reader sees, not what the Markdown says.

``mkdocs build --strict`` passes a page whose Markdown did not render: a footnote shown as
``[^1]`` (its extension missing), a bullet glued into the paragraph before it (a block
indented wrongly inside a list item), a link or code span left as its source. These tests
read the built HTML for every such class of fault, on every page: raw Markdown syntax in the
text, doctest directives in the examples, broken lists, and signatures that scroll sideways.

The site is built by mkdocs into a temporary folder (or read from ``SAFETENSORS_HEADER_SITE``,
where the docs nox session built it); without mkdocs the tests that need the site skip, and
the docs session, which installs it, runs them.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The elements whose text a reader reads as prose (code, pre and the like are not prose).
PROSE = frozenset({"p", "li", "td", "th", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6"})
CODE = frozenset({"code", "pre", "kbd", "script", "style", "svg"})
VOID = frozenset({"br", "hr", "img", "input", "link", "meta", "wbr", "source", "col"})
# Markdown that did not render, as it shows in the text of a page.
RAW_MARKDOWN = {
    "a footnote reference": re.compile(r"\[\^[^\]\s]+\]"),
    "strong emphasis": re.compile(r"\*\*"),
    "a link": re.compile(r"\]\(|\]\["),
    "a code span": re.compile(r"`"),
    "a heading": re.compile(r"(?:^|\n)[ \t]*#{1,6} \S"),
    # A bullet glued into the paragraph before it: a line of the text that starts as a list
    # item does (the list did not end the paragraph).
    "a list item inside a paragraph": re.compile(r"\n[ \t]*[-*+][ \t]+\S"),
}
DOCTEST = re.compile(r"#\s*doctest:")
# A code line of up to 88 characters fits the content column (docs/stylesheets/extra.css).
WIDEST = 88


class _Page(HTMLParser):
    """The prose of a page's article, a text for each prose element (nested ones apart), and
    the text of its code and of its API signatures."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.article = 0  # depth inside <article>: the page's content
        self.prose: list[tuple[str, list[str]]] = []  # (tag, its text's pieces)
        self.stack: list[int] = []  # the open prose elements, as indices into `prose`
        self.code: list[str] = []
        self.signatures: list[list[str]] = []
        self.in_signature = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        self.open.append(tag)
        if tag == "article":
            self.article += 1
        classes = (dict(attrs).get("class") or "").split()
        if tag == "div" and "doc-signature" in classes:
            self.signatures.append([])
            self.in_signature = len(self.open)
        if tag in PROSE and self.article:
            self.prose.append((tag, []))
            self.stack.append(len(self.prose) - 1)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID or tag not in self.open:
            return
        while self.open:
            closed = self.open.pop()
            if closed == "article":
                self.article -= 1
            if closed in PROSE and self.stack:
                self.stack.pop()
            if self.in_signature > len(self.open):
                self.in_signature = 0
            if closed == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.in_signature:
            self.signatures[-1].append(data)
        if any(tag in CODE for tag in self.open):
            self.code.append(data)
        elif self.stack:
            self.prose[self.stack[-1]][1].append(data)


def faults(page: str) -> list[str]:
    """What a reader would see wrong on a page of HTML: raw Markdown in its prose, doctest
    directives in its code, signatures wider than a code line fits."""
    parser = _Page()
    parser.feed(page)
    found = []
    for tag, pieces in parser.prose:
        text = "".join(pieces)
        for what, pattern in RAW_MARKDOWN.items():
            if pattern.search(text):
                found.append(f"{what} in the text of a <{tag}>: {text.strip()[:120]!r}")
    code = "".join(parser.code)
    if DOCTEST.search(code):
        found.append(f"{len(DOCTEST.findall(code))} doctest directives in the code")
    for pieces in parser.signatures:
        lines = html.unescape("".join(pieces)).splitlines()
        # An attribute's value (`NAME: type = value`) is its source; a signature of a
        # function or class is formatted to fit.
        if lines and re.match(r"\s*\w+\s*:.*=", lines[0]):
            continue
        wide = [line for line in lines if len(line) > WIDEST]
        if wide:
            found.append(f"a signature {len(wide[0])} characters wide: {wide[0][:60]!r}...")
    return found


@pytest.mark.parametrize(
    ("fragment", "fault"),
    [
        ("<p>as hf-mem says [^1]</p>", "a footnote reference"),
        ("<table><tr><td>error [^2]</td></tr></table>", "a footnote reference"),
        ("<p>a **bold** claim</p>", "strong emphasis"),
        ("<p>see [the page](page.md)</p>", "a link"),
        ("<p>call `read_header`</p>", "a code span"),
        ("<p>where name is ...\n- <strong>The model's fingerprint</strong>: ...</p>", "a list"),
        ("<li><p>a first\n* a second, glued</p></li>", "a list"),
        ("<p>text\n## A heading</p>", "a heading"),
        ("<pre><code>&gt;&gt;&gt; load(path)  # doctest: +SKIP</code></pre>", "doctest"),
        (
            '<div class="doc-signature highlight"><pre><code>load(source: Source, /, *, '
            "names: Iterable[str] | None = None, device: Device = 'cpu', into: Mapping[str, "
            "Tensor] | None = None)</code></pre></div>",
            "a signature",
        ),
    ],
    ids=lambda value: value if len(value) < 24 else None,
)
def test_the_checker_finds_each_kind_of_fault(fragment: str, fault: str) -> None:
    page = f"<html><body><article>{fragment}</article></body></html>"
    found = faults(page)
    assert len(found) == 1, found
    assert found[0].startswith(fault) or fault in found[0]


def test_the_checker_passes_what_rendered() -> None:
    page = (
        "<article><p>a <strong>bold</strong> claim, <code>read_header</code>, "
        '<a href="page/">the page</a>, 2 - 1 and 2 * 3<sup id="fnref:1">1</sup></p>'
        "<ul><li>one</li><li><p>two</p><ul><li>nested</li></ul></li></ul>"
        "<pre><code>`code` **kept** [^1] as it is\n- a bullet in code</code></pre>"
        '<div class="doc-signature highlight"><pre><code>load(\n    source: Source,\n)'
        "</code></pre></div></article>"
    )
    assert faults(page) == []


def _site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("SAFETENSORS_HEADER_SITE")
    if given:
        return Path(given)
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]'; nox -s docs runs this)")
    site = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-4000:]
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _site(tmp_path_factory)


def _pages() -> list[str]:
    pages = sorted(path.stem for path in (ROOT / "docs").glob("*.md"))
    return ["index" if page == "index" else page for page in pages]


@pytest.mark.parametrize("page", _pages())
def test_the_page_renders(site: Path, page: str) -> None:
    built = site / "index.html" if page == "index" else site / page / "index.html"
    assert built.is_file(), f"{page}.md was not built"
    assert faults(built.read_text(encoding="utf-8")) == []


def test_the_model_page_has_its_footnotes(site: Path) -> None:
    text = (site / "model" / "index.html").read_text(encoding="utf-8")
    assert text.count('class="footnote-ref"') >= 3
    assert 'class="footnote"' in text


def test_the_torch_load_signature_is_formatted(site: Path) -> None:
    # One parameter a line, as ruff formats it (without ruff, mkdocstrings writes one line).
    text = html.unescape(re.sub(r"<[^>]+>", "", (site / "torch" / "index.html").read_text()))
    assert "load(\n    source: Source,\n    /,\n    *,\n" in text
