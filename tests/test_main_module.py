"""``python -m chunkwise``: the command line where chunkwise-tools is installed, and where it
is not, how to install it (exit status 1, the message on stderr).

The library never imports the tools: ``chunkwise.__main__`` finds the
``chunkwise`` console script's entry point and calls it.
"""

from __future__ import annotations

from importlib.metadata import EntryPoints

import pytest

import chunkwise
import chunkwise.__main__ as main_module
from helpers.processes import run_python


def test_python_m_chunkwise_runs_the_command_line_of_the_tools(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("chunkwise_tools", reason="the tools are not installed")
    # argv as a console script gets it: the entry point reads sys.argv itself.
    monkeypatch.setattr("sys.argv", ["chunkwise", "--version"])
    status = main_module.main()
    assert (status, capsys.readouterr()) == (0, (f"chunkwise {chunkwise.__version__}\n", ""))


async def test_python_m_chunkwise_in_a_process_prints_the_tools_version() -> None:
    pytest.importorskip("chunkwise_tools", reason="the tools are not installed")
    status, out, err = await run_python("-m", "chunkwise", "--version")
    assert (status, out.strip(), err) == (0, f"chunkwise {chunkwise.__version__}", "")


def test_without_the_tools_python_m_chunkwise_says_how_to_install_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    looked_up: list[dict[str, str]] = []

    def no_entry_points(**selection: str) -> EntryPoints:
        looked_up.append(selection)
        return EntryPoints(())

    monkeypatch.setattr(main_module, "entry_points", no_entry_points)
    monkeypatch.setattr("sys.argv", ["chunkwise", "demo"])
    status = main_module.main()
    out, err = capsys.readouterr()
    assert looked_up == [{"group": "console_scripts", "name": "chunkwise"}]
    assert (status, out) == (1, "")
    assert "chunkwise-tools" in err
    assert "pip install" in err
