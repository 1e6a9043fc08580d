"""pyright's --verifytypes over the public face: every exported symbol fully typed.

Run by ``.ci/run`` with the venv's interpreter: ``.ci-venv/bin/python .ci/verifytypes.py``.
basedpyright (the ``dev`` extra; PyPI only, it brings its own Node.js) checks
what a user's type checker sees of ``chunkwise``.  One exception, by design:
the event unions (``chunkwise.TerminalEvent``, ``chunkwise.types.LifecycleEvent``
and each namespace's ``Event``) name the bare generic terminal events, so that
``isinstance(event, chunkwise.TerminalEvent)`` works at run time and in pyright
(which refuses subscripted generics there); pyright reports their type
argument as unknown.  Anything else fails the check.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# "Type argument 1 for class "StreamCompleted" has unknown type", and the same
# for the other two terminal events: the bare generics of the unions.
BY_DESIGN = re.compile(
    r'Type argument 1 for class "Stream(Completed|Incomplete|Failed)" has unknown type'
)


def main() -> int:
    venv = Path(sys.executable).parent.parent
    env = {
        **os.environ,
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    # From an empty folder: inside the checkout pyright would read the source
    # tree as the project instead of the installed package.
    with tempfile.TemporaryDirectory() as empty:
        run = subprocess.run(
            [
                venv / "bin" / "basedpyright",
                "--verifytypes",
                "chunkwise",
                "--ignoreexternal",
                "--outputjson",
            ],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    report = json.loads(run.stdout)["typeCompleteness"]
    if not report["symbols"]:
        print("verifytypes: pyright found no chunkwise package", file=sys.stderr)
        return 1
    failures = [
        f"{symbol['name']}: {diagnostic['message']}"
        for symbol in report["symbols"]
        for diagnostic in symbol["diagnostics"]
        if diagnostic["severity"] == "error" and not BY_DESIGN.fullmatch(diagnostic["message"])
    ]
    print(f"verifytypes: {len(report['symbols'])} symbols, {len(failures)} not fully typed")
    for failure in failures:
        print(f"  {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
