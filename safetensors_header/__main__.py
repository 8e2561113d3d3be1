"""``python -m safetensors_header``: see `safetensors_header._cli`.

Layer: adapters.
"""

from ._cli import main

raise SystemExit(main())
