"""``inspect --api`` on the other API's recording says so, instead of an empty summary alone.

``--api chat`` on a Responses recording (and the reverse) used to print an empty
stream and nothing else.  Now stderr says that every event was ignored and which
API the file looks like; when the wrong parser still found something (an error
event), a note says which API the file looks like.  Every stored recording of
each API is tried with the other's parser, and with its own (no note).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chunkwise_tools.cli import main
from helpers.data import DATA, RECORDINGS

RESPONSES = sorted((DATA / "responses").glob("*.sse"))
RESPONSES += sorted((DATA / "llama_cpp").glob("responses_*.sse"))  # not its completions_*
# A Responses recording whose error event the chat parser also reads as an error.
ERRORS = {"flat_error.sse", "llama_cpp_error.sse", "openai_failed_nested_error.sse"}
ERRORS |= {"responses_error_mid_stream.sse"}
ADVICE = "or leave --api out to tell from the stream)"


def inspect(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["inspect", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("path", RESPONSES, ids=lambda p: p.name)
def test_a_responses_recording_read_as_chat_says_what_it_looks_like(
    capsys: pytest.CaptureFixture[str], path: Path
) -> None:
    for output in ([], ["--json"]):
        status, out, err = inspect(capsys, "--api", "chat", *output, str(path))
        assert status == 1 and out  # the (empty) summary is still printed, on stdout
        if path.name in ERRORS:
            assert err == (
                "chunkwise inspect: note: this file looks like a Responses API stream, not "
                f"chat completions (try --api responses, {ADVICE}\n"
            )
        else:
            assert err == (
                "chunkwise inspect: every event was ignored: --api chat reads chat "
                "completions streams, and this file looks like a Responses API stream "
                f"(try --api responses, {ADVICE}\n"
            )
    status, _, err = inspect(capsys, "--api", "responses", str(path))
    assert err == ""


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_a_chat_recording_read_as_responses_says_every_event_was_ignored(
    capsys: pytest.CaptureFixture[str], path: Path
) -> None:
    status, out, err = inspect(capsys, "--api", "responses", str(path))
    assert status == 1 and "no output" in out
    assert err == (
        "chunkwise inspect: every event was ignored: --api responses reads Responses API "
        "streams, and this file looks like a chat completions stream "
        f"(try --api chat, {ADVICE}\n"
    )
    for api in ("chat", "auto"):
        status, _, err = inspect(capsys, "--api", api, str(path))
        assert (status, err) == (0, "")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_stream_that_does_not_tell_its_api_gets_no_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, api: str
) -> None:
    path = tmp_path / "quiet.sse"
    path.write_bytes(b": keep-alive\n\ndata: [DONE]\n\n")
    status, _, err = inspect(capsys, "--api", api, str(path))
    assert status == 1 and err == ""
