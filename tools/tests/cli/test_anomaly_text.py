"""An anomaly reads the same in every command, with how many times it happened."""

from __future__ import annotations

from pathlib import Path

import pytest

import chunkwise
from chunkwise_tools.cli._common import anomaly_text
from helpers.bodies import choice, chunk, sse
from helpers.cli import run_main


@pytest.mark.parametrize(
    ("anomaly", "text"),
    [
        (chunkwise.Anomaly(kind="k", detail="d"), "k: d"),
        (chunkwise.Anomaly(kind="k", detail="d", choice_index=2), "k (choice 2): d"),
        (chunkwise.Anomaly(kind="k", detail="d", count=3), "k (×3): d"),
        (
            chunkwise.Anomaly(kind="k", detail="a\n b\x1b", choice_index=0, count=2),
            "k (choice 0) (×2): a b\\x1b",
        ),
    ],
)
def test_an_anomaly_on_one_line_with_its_count(anomaly: chunkwise.Anomaly, text: str) -> None:
    assert anomaly_text(anomaly) == text


async def test_inspect_shows_a_counted_anomaly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Three chunks after the end are one "data after end" anomaly, counted 3.
    body = sse(chunk(choice(content="x", finish_reason="stop"))) + sse(
        chunk(choice(content="a")), chunk(choice(content="b")), chunk(choice(content="c"))
    )
    parser = chunkwise.chat.Parser()
    parser.feed(body)
    parser.end()
    (counted,) = [a for a in parser.result.anomalies if a.count > 1]
    path = tmp_path / "late.sse"
    path.write_bytes(body)
    status, out, err = await run_main(capsys, "inspect", str(path))
    assert status == 0, err
    assert f"  - {counted.kind} (×{counted.count}): " in out
