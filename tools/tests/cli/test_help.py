"""The help texts and the CLI reference in ``tools/docs/cli.rst`` say what the commands do.

Each command's ``--help`` is in the docs' ``_cli_help/``, committed so the
reference reads on GitHub, and rewritten when the docs are built
(``tools/docs/conf.py``); the examples of output in ``tools/docs/cli.rst`` are written by
hand, so these tests compare them with a real run.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from chunkwise_tools.cli import build_parser, help_pages, main
from chunkwise_tools.server import open_chat_server
from helpers.cli import run_main
from helpers.data import REPO

CLI_DOC = (REPO / "tools" / "docs" / "cli.rst").read_text(encoding="utf-8")


def code_block_after(marker: str) -> list[str]:
    """The lines of the first ``code-block`` after ``marker`` in cli.rst, dedented."""
    rest = CLI_DOC[CLI_DOC.index(marker) :]
    rest = rest[rest.index(".. code-block:: text") :]
    lines = rest.splitlines()[2:]
    block: list[str] = []
    for line in lines:
        if line and not line.startswith("   "):
            break
        block.append(line[3:])
    while block and not block[-1]:
        block.pop()
    return block


def test_top_level_help_describes_the_tool(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Parse and inspect" not in out
    for command in ("inspect", "chat", "record", "probe", "serve", "demo"):
        assert command in out
    description = build_parser().description
    assert description is not None
    for word in ("Stream", "record", "inspect", "probe", "bench", "serve", "chunkwise demo"):
        assert word in description


def test_the_committed_help_pages_are_the_parsers(monkeypatch: pytest.MonkeyPatch) -> None:
    # cli.rst includes them: ignored by git, they were missing from the page on GitHub.
    monkeypatch.setenv("COLUMNS", "88")  # tools/docs/conf.py's CLI_HELP_COLUMNS
    pages = REPO / "tools" / "docs" / "_cli_help"
    committed = {path.stem: path.read_text(encoding="utf-8") for path in pages.glob("*.txt")}
    assert committed == help_pages(), "rebuild the tools' docs (nox -s docs) and commit _cli_help/"
    for name in committed:
        assert f".. literalinclude:: _cli_help/{name}.txt" in CLI_DOC


def test_the_inspect_example_in_the_docs_is_a_real_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    block = code_block_after("For example:")
    assert block[0] == "$ chunkwise inspect examples/recordings/parallel_tool_calls.sse"
    monkeypatch.chdir(REPO)
    assert main(["inspect", "examples/recordings/parallel_tool_calls.sse"]) == 0
    assert capsys.readouterr().out.splitlines() == block[1:]


@pytest.mark.parametrize(
    ("marker", "options"),
    [
        ("A probe of the embedded server's", ["--model", "quirks-null-index"]),
        ("A probe of a TGI-style server", ["--api", "completions", "--model", "quirks-tgi"]),
    ],
)
async def test_the_probe_sample_in_the_docs_has_what_a_real_run_prints(
    capsys: pytest.CaptureFixture[str], marker: str, options: list[str]
) -> None:
    block = code_block_after(marker)
    assert block[0].endswith("chunkwise probe " + " ".join(options))
    async with open_chat_server() as server:
        argv = ["probe", "--base-url", server.base_url, *options]
        status, out, _ = await run_main(capsys, *argv)
    assert status == 0
    real = out.splitlines()
    documented = block[1:]  # after the command line

    def shape(lines: list[str]) -> list[str]:
        # Labels and sections; ports and times differ from run to run.
        return [line.split("  ")[0] if "  " in line else line.split(":")[0] for line in lines]

    assert shape(documented) == shape(real)
    assert "requests:" in documented
    times = ("time to first byte", "time to first token")
    same = [line for line in real[1:] if not line.startswith(times)]
    assert same == [line for line in documented[1:] if not line.startswith(times)]


def test_the_record_epilog_is_true_about_failed_connections(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # What --help promises for a failed connection (no file left behind) is
    # what test_record.test_connection_refused_leaves_no_file checks.
    assert main(["record", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no file is left behind" in out
    assert "the file is still written" not in out


@pytest.mark.parametrize("command", ["chat", "record", "probe"])
def test_commands_that_send_a_request_share_their_options(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main([command, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--base-url URL" in out
    assert "$OPENAI_BASE_URL" in out
    assert "--api-key-env NAME" in out
    assert "--model MODEL" in out
    assert "$CHUNKWISE_MODEL" in out


def test_probe_json_of_a_refused_connection(
    capsys: pytest.CaptureFixture[str], refused_port: int
) -> None:
    assert main(["probe", "--base-url", f"http://127.0.0.1:{refused_port}/v1", "--json"]) == 3
    findings = json.loads(capsys.readouterr().out)
    assert findings["requests"][0]["error"].endswith("connection refused")


@pytest.mark.parametrize(
    "marker", ["**Hosted tools, tool input, images and audio.**", "asked for: PCM16 (24 kHz"]
)
async def test_the_chat_surface_examples_in_the_docs_are_real_runs(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    marker: str,
) -> None:
    # Each "$ chunkwise chat ..." of the block, its stdout then its stderr.
    monkeypatch.chdir(tmp_path)  # where --audio-out writes
    runs: list[list[str]] = []
    for line in code_block_after(marker):
        if line.startswith("$ "):
            runs.append([line])
        elif line:
            runs[-1].append(line)
    async with open_chat_server() as server:
        for command, *documented in runs:
            argv = shlex.split(command.removeprefix("$ chunkwise ").split("  #")[0])
            status, out, err = await run_main(capsys, *argv, "--base-url", server.base_url)
            assert status == 0, err
            assert out.splitlines() + err.splitlines() == documented
