"""Start-up: the root imports one command's module, the one named, and no dependency before it.

``chunkwise --help`` once imported every command, trio, h11 and the library
(0.7 s of imports; 2 s on a busy machine), and a Ctrl-C in those imports printed
a traceback.  What is imported is checked in a fresh interpreter, never timed.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType

import pytest

from chunkwise_tools.cli import build_parser, main
from chunkwise_tools.cli._commands import COMMANDS
from helpers.processes import run_python

HEAVY = ["trio", "h11", "jsonschema", "openai", "chunkwise", "chunkwise_tools.server"]
COMMAND_MODULES = [f"chunkwise_tools.cli.{name}" for name in COMMANDS]


async def _imported_by(*argv: str) -> set[str]:
    """The modules of :data:`HEAVY` and the commands' that ``main(argv)`` imports."""
    code = (
        "import contextlib, io, json, sys\n"
        "from chunkwise_tools.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({list(argv)!r})\n"
        f"print(json.dumps([m for m in {HEAVY + COMMAND_MODULES!r} if m in sys.modules]))\n"
    )
    status, out, err = await run_python("-c", code)
    assert status == 0, err
    return set(json.loads(out))


@pytest.mark.parametrize("argv", [["--help"], ["--version"], []], ids=["help", "version", "none"])
async def test_the_root_imports_no_command_and_no_dependency(argv: list[str]) -> None:
    assert await _imported_by(*argv) == set()


@pytest.mark.parametrize("name", sorted(COMMANDS))
async def test_a_command_imports_its_own_module_and_no_other_command(name: str) -> None:
    imported = await _imported_by(name, "--help")
    assert {m for m in imported if m in COMMAND_MODULES} == {f"chunkwise_tools.cli.{name}"}


def test_the_root_lists_every_command_as_the_full_parser_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    assert capsys.readouterr().out == build_parser().format_help()


def test_ctrl_c_while_a_command_is_imported_exits_130_without_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.import_module

    def interrupted(name: str, package: str | None = None) -> ModuleType:
        if package == "chunkwise_tools.cli":
            raise KeyboardInterrupt
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", interrupted)
    assert main(["chat", "hi"]) == 130
    assert capsys.readouterr() == ("", "")


async def test_a_command_imports_neither_trio_testing_nor_pytest() -> None:
    # The library asked whether the clock was trio.testing's MockClock by
    # importing trio.testing, which imports pytest when installed: 0.1 s more.
    code = (
        "import sys, chunkwise_tools.cli.chat\n"
        "print(sorted({'trio.testing', 'pytest'} & set(sys.modules)))"
    )
    status, out, err = await run_python("-c", code)
    assert (status, out) == (0, "[]\n"), err
