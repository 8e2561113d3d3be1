"""The strict audit: what the reference accepts but a careful reader should not (padding
that is not spaces, duplicate metadata keys, names that print alike...).

    from safetensors_header.audit import audit_header

Layer: adapters (a public face of the core's audit).
"""

from __future__ import annotations

from ._audit import FINDING_KINDS, Finding, audit_header

__all__ = ["FINDING_KINDS", "Finding", "audit_header"]
