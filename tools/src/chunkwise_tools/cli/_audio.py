"""``--audio-out``: the spoken answer written to a file (``chat`` and ``inspect``).

Theory of operation
-------------------
Audio streams as base64 fragments (chat's ``delta.audio.data``, the Responses
API's ``response.audio.delta``), which the library joins (``audio.data``);
its transcript is text, which ``chat`` shows as text.  The file is written
once, when the stream is over: complete, cut short or interrupted (then with
what arrived, and saying so).

Rules
-----
1. ``chat --audio-out`` asks for audio the way chat does: ``modalities:
   ["text", "audio"]`` and ``audio: {"voice", "format"}`` (``--voice``,
   ``--audio-format``).  The Responses API has no request field for audio
   output (a server that speaks sends it unasked), so nothing is added;
   legacy completions have no audio, and refuse the option.
2. The stream never names its audio format: it is the one asked for
   (``--audio-format``, default ``pcm16``, the only one OpenAI streams).
   PCM16 (24 kHz, mono, 16-bit little-endian) has no header and plays
   nowhere, so it is written as a WAV file (:mod:`wave`), unless PATH ends
   in ``.pcm`` or ``.raw``; any other format is written as received.
3. Audio that is not base64 is written as received (its text) and said so:
   never dropped.
4. A chat answer with several choices has one file: the first choice's that
   spoke (the note names it when it is not choice 0).
5. No audio at all writes no file, and the command says so and exits 1: what
   was asked for did not come.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import sys
import wave
from typing import Any

from chunkwise import chat, completions, messages, responses

from ._common import EXIT_OK, EXIT_STREAM, PROG, UsageError, printable

__all__ = [
    "PCM16_RATE",
    "add_audio_options",
    "ask_for_audio",
    "audio_summary",
    "decode_base64",
    "result_audio",
    "save_audio",
]

#: Samples a second of OpenAI's PCM16 audio (mono, 16-bit little-endian).
PCM16_RATE = 24000

_RAW_SUFFIXES = (".pcm", ".raw")


def add_audio_options(parser: argparse.ArgumentParser, *, request: bool) -> None:
    """``--audio-out`` and ``--audio-format``; with ``request``, ``--voice`` (rule 1)."""
    parser.add_argument(
        "--audio-out",
        metavar="PATH",
        help=(
            "write the spoken answer to PATH at the end (also when cut short or "
            "interrupted: what arrived); PCM16 is written as a WAV file (24 kHz, mono) "
            "unless PATH ends in .pcm or .raw, any other format as received"
            + (
                "; chat asks for it (modalities and audio), the Responses API has no "
                "request field for it"
                if request
                else ""
            )
        ),
    )
    parser.add_argument(
        "--audio-format",
        metavar="FORMAT",
        default="pcm16",
        help=(
            "the audio's format (default pcm16, the only one OpenAI streams)"
            + ("; chat sends it as audio.format" if request else "")
        ),
    )
    if request:
        parser.add_argument(
            "--voice",
            metavar="VOICE",
            default="alloy",
            help="the voice chat asks for with --audio-out (audio.voice; default alloy)",
        )


def ask_for_audio(request: dict[str, Any], args: argparse.Namespace, api: str) -> None:
    """Add what asks ``api`` for audio to ``request`` (rule 1)."""
    if api == "completions":
        raise UsageError("--audio-out is for --api chat or responses: a completion has no audio")
    if api == "messages":
        raise UsageError("--audio-out is for --api chat or responses: a message has no audio")
    if api == "chat":
        request["modalities"] = ["text", "audio"]
        request["audio"] = {"voice": args.voice, "format": args.audio_format}


def result_audio(
    result: chat.Result | responses.Result | completions.Result | messages.Result,
) -> tuple[str, str, str] | None:
    """The answer's audio: (where, base64 data, transcript), or None when it has none.

    ``where`` is ``""``, or ``"choice N"`` for a chat choice other than 0;
    chat's first choice that spoke (rule 4).
    """
    if isinstance(result, messages.Result):
        return None
    if isinstance(result, responses.Result):
        audio = result.audio
        return None if audio is None else ("", audio.data, audio.transcript)
    for choice in result.choices:
        spoken = choice.audio if isinstance(choice, chat.ChoiceResult) else None
        if spoken is not None and spoken.data:
            where = f"choice {choice.index}" if choice.index else ""
            return where, spoken.data, spoken.transcript
    return None


def decode_base64(data: str) -> bytes | None:
    """The bytes ``data`` encodes (audio, an image), or None when it is not base64."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def audio_summary(data: str, transcript: str) -> str:
    """``960 bytes, transcript of 49 characters``: the audio in a summary line."""
    raw = decode_base64(data)
    size = f"{len(raw)} bytes" if raw is not None else f"{len(data)} characters, not base64"
    return f"{size}, transcript of {len(transcript)} characters"


def save_audio(
    command: str,
    path: str,
    result: chat.Result | responses.Result | completions.Result | messages.Result | None,
    audio_format: str,
    *,
    interrupted: bool = False,
) -> int:
    """Write ``result``'s audio to ``path`` and say so on stderr (``chunkwise <command>: ...``).

    Returns the exit status it calls for: 0, or 1 when no audio, or no
    base64, arrived (rules 3 and 5).

    Raises:
        UsageError: ``path`` cannot be written.
    """
    spoken = None if result is None else result_audio(result)
    if spoken is None:
        print(
            f"{PROG} {command}: note: no audio arrived; nothing written to {path!r}",
            file=sys.stderr,
        )
        return EXIT_STREAM
    where, data, _ = spoken
    raw = decode_base64(data)
    try:
        if raw is None:
            with open(path, "wb") as file:
                file.write(data.encode())
            what = f"{len(data)} characters of audio that is not base64, as received"
        elif audio_format == "pcm16" and not path.lower().endswith(_RAW_SUFFIXES):
            # The file opened first: wave.open(path) fails half-built on a bad path.
            with open(path, "wb") as file, wave.open(file, "wb") as wav:
                wav.setnchannels(1)
                wav.setsampwidth(2)
                wav.setframerate(PCM16_RATE)
                wav.writeframes(raw)
            what = f"{len(raw)} bytes of PCM16 audio as WAV ({PCM16_RATE} Hz, mono)"
        else:
            with open(path, "wb") as file:
                file.write(raw)
            what = f"{len(raw)} bytes of {printable(audio_format)} audio"
    except OSError as exc:
        raise UsageError(f"cannot write {path!r}: {exc.strerror or exc}") from None
    notes = [f"{where}'s" if where else "", "what arrived before the interruption" * interrupted]
    detail = "; ".join(note for note in notes if note)
    print(
        f"{PROG} {command}: wrote {what} to {path!r}" + (f" ({detail})" if detail else ""),
        file=sys.stderr,
    )
    return EXIT_OK if raw is not None else EXIT_STREAM
