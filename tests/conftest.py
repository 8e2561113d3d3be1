"""Fixtures shared by test modules: the loopback HTTP servers of `loopback`; and the node ids
this run collected, deselected ones included (`collected_ids`)."""

from __future__ import annotations

import pytest
from loopback import kept_site, loopback_hub, serve, site

__all__ = ["kept_site", "loopback_hub", "serve", "site"]

_DESELECTED = pytest.StashKey[set[str]]()


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        deselected = items[0].config.stash.setdefault(_DESELECTED, set())
        deselected.update(item.nodeid for item in items)


@pytest.fixture(scope="session")
def collected_ids(request: pytest.FixtureRequest) -> frozenset[str]:
    """Every test this run collected, those that -m or -k deselected included."""
    session = request.session
    return frozenset(
        {item.nodeid for item in session.items} | session.config.stash.get(_DESELECTED, set())
    )
