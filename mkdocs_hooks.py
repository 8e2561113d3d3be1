"""MkDocs hooks of the documentation site (mkdocs.yml's ``hooks``).

The API pages' examples come from the docstrings, whose lines carry doctest directives
(``# doctest: +SKIP``) for a doctest run: they say nothing to a reader, so the site leaves
them out (the code copied from the site is then as a reader would type it).
"""

from __future__ import annotations

import re
from typing import Any

# "  # doctest: +SKIP", "# doctest: +ELLIPSIS, +NORMALIZE_WHITESPACE": the directive alone
# (a comment before it on the line stays).
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*doctest:[ \t]*[+-][A-Z_]+(?:[ \t]*,[ \t]*[+-][A-Z_]+)*")


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML without doctest directives."""
    return _DIRECTIVE.sub("", html)
