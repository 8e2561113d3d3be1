"""``python -m safetensors_header``: see `safetensors_header._cli`."""

from ._cli import main

raise SystemExit(main())
