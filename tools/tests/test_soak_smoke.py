"""bench/soak.py at a tiny size: the counts it must keep at 0 are 0, and it says PASS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


def test_the_soak_retries_before_output_and_never_duplicates_or_loses() -> None:
    argv = [sys.executable, str(SOAK), "--streams", "45", "--concurrency", "15"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.rsplit(None, 1) for line in done.stdout.splitlines()[1:-1]]
    counts = {name.strip(): int(value) for name, value in rows}
    assert counts["duplicated"] == counts["lost"] == counts["retried after output"] == 0
    assert counts["retried"] > 0 and done.stdout.splitlines()[-1].startswith("PASS")
