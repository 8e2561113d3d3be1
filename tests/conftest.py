"""Fixtures shared by test modules: the loopback HTTP servers of `loopback`; and the tests
marked slow run untraced by coverage (`no_cover`)."""

from __future__ import annotations

import pytest
from loopback import loopback_hub, serve, site

__all__ = ["loopback_hub", "serve", "site"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A slow test is a stress run (a million tensors, hundreds of examples, many processes):
    # it runs the lines the quick tests cover, many times, at several times the cost when
    # traced, so it runs untraced; the coverage gates hold without it (noxfile.py).
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.no_cover)
