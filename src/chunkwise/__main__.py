"""``python -m chunkwise``: the ``chunkwise`` command line, where ``chunkwise-tools`` is installed.

The command line is another distribution, which the library never imports: it
is found as the ``chunkwise`` console script's entry point and called.  Where it
is not installed, this says how to install it (exit status 1).
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

INSTALL_TOOLS = (
    "python -m chunkwise: the chunkwise command line is the chunkwise-tools distribution, "
    "which is not installed.\n"
    "Install it with:  python -m pip install chunkwise-tools\n"
    "(from a clone of the repository:  python -m pip install -e ./tools)"
)


def main() -> int:
    """Run the ``chunkwise`` console script's entry point; 1 with a message when there is none."""
    found = entry_points(group="console_scripts", name="chunkwise")
    if not found:
        print(INSTALL_TOOLS, file=sys.stderr)
        return 1
    # The entry point's function takes argv from sys.argv, as a console script does.
    script = next(iter(found)).load()
    status = script()
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
