"""The reference's Python API (the ``safetensors`` package's), over this project's readers.

Layer: adapters. ``safetensors_header.install_as_safetensors()`` makes ``import safetensors``
this module and its framework modules (``.torch``, ``.numpy``, ``.flax``, ``.tensorflow``,
``.paddle``, ``.mlx``) these modules' namesakes. This module is the reference's top level:
``safe_open``, ``SafetensorError``, ``serialize``, ``serialize_file``, ``deserialize``,
``TensorSpec``, ``__version__`` (the reference's version whose API it offers).
"""

from ._errors import SafetensorError
from ._open import safe_open
from ._open import safe_open_handle as _safe_open_handle  # noqa: F401 - the reference has it
from ._serialize import TensorSpec, deserialize, serialize, serialize_file

__all__ = [
    "SafetensorError",
    "TensorSpec",
    "__version__",
    "deserialize",
    "safe_open",
    "serialize",
    "serialize_file",
]

#: The version of the reference whose API this is (code that checks it sees that one).
__version__ = "0.8.0"
