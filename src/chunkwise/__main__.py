"""``python -m chunkwise``: the same command line as the ``chunkwise`` script."""

from ._cli import main

raise SystemExit(main())
