"""Fixtures shared by test modules: the loopback HTTP servers of `loopback`."""

from loopback import serve, site

__all__ = ["serve", "site"]
