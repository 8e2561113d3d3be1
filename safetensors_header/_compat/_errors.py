"""The reference's error type, for code that catches it by name.

Layer: adapters.
"""

from __future__ import annotations

__all__ = ["SafetensorError"]


class SafetensorError(Exception):
    """The error the reference's ``safetensors`` package raises (its ``SafetensorError``)."""
