"""``python -m chunkwise_tools``: the ``chunkwise`` command line."""

from .cli import main

raise SystemExit(main())
