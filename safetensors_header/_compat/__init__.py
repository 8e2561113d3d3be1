"""The reference's Python API (the ``safetensors`` package's), over this project's readers.

Layer: adapters. ``safetensors_header.install_as_safetensors()`` makes ``import safetensors``
and its framework modules (``.torch``, ``.numpy``, ``.flax``, ``.tensorflow``, ``.paddle``,
``.mlx``) these modules.
"""
