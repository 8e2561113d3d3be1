"""Fixtures shared by test modules: the loopback HTTP server (`loopback.site`)."""

from loopback import site

__all__ = ["site"]
