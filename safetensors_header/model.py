"""What a model is, from its headers and config.json: its kind, quantization, parameters
(buffers apart), the memory of its weights and of running it, with the evidence of each
guess (docs/model.md).

    from safetensors_header.model import describe_model

Layer: adapters (a public face of the services it re-exports).
"""

from __future__ import annotations

from ._describe import describe_model
from ._model import Adapter, DtypeParameters, Evidence, Inference, ModelInfo, Quantization

__all__ = ["Adapter", "DtypeParameters", "Evidence", "Inference", "ModelInfo", "Quantization"]
__all__ += ["describe_model"]
