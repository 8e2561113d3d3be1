"""Fixtures shared by test modules: the loopback HTTP servers of `loopback`."""

from loopback import loopback_hub, serve, site

__all__ = ["loopback_hub", "serve", "site"]
