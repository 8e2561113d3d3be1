"""The JSON documents beside a model's weights (a config, a checkpoint's index, a quantization
state, a manifest of hashes), read with the depth bound of the header's JSON.

Layer: core (sans-IO).
"""

from __future__ import annotations

import json

from ._core.rules import MAX_DEPTH, nested_deeper_than

__all__ = ["json_document"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import Any


def json_document(raw: bytes | str) -> Any:
    """A JSON document beside the weights (a config, an index, a quantization state): its
    value, or ValueError (json's, UnicodeDecodeError, or one for a document that nests
    deeper than `MAX_DEPTH` arrays and objects, refused before json reads it: its reader
    recurses, and would raise RecursionError)."""

    # (bytes in any of the encodings json.loads takes: UTF-8 with or without a BOM, UTF-16, 32)
    text = raw.decode(json.detect_encoding(raw), "surrogatepass") if isinstance(raw, bytes) else raw
    if nested_deeper_than(text, MAX_DEPTH):
        raise ValueError(f"it nests deeper than {MAX_DEPTH} arrays and objects")
    return json.loads(text)
