"""Integrity: a digest of every tensor, the model's fingerprint and each file's digest, in one
pass; manifests to check against later; and each file against the sha256 the Hugging Face
Hub publishes (docs/integrity.md).

    from safetensors_header.integrity import hash_tensors, verify_files, verify_tensors

Layer: adapters (a public face of the services it re-exports).
"""

from __future__ import annotations

from ._hashes import TensorHashes, hash_tensors, verify_tensors
from ._verify import FileCheck, published_sha256, verify_files

__all__ = ["FileCheck", "TensorHashes", "hash_tensors", "published_sha256", "verify_files"]
__all__ += ["verify_tensors"]
