"""Scripted chat streams: what an assistant says, and how a provider puts it on the wire.

A :class:`Scenario` is plain data saying *what* the assistant says (reasoning,
content pieces, tool calls with their argument fragments, finish reason, usage)
and a :class:`WireStyle` saying *how* a particular provider writes it (tool-call
delta shape, where usage goes, keep-alive comments, ``data:`` spacing, line
endings).  Two pure functions turn a scenario into output:
:func:`scenario_chunks` gives the chunk dicts (one choice per chunk, ``n``
choices interleaved step by step, as OpenAI does), and :func:`scenario_events`
gives the exact bytes of each SSE event.  The chat server, ``chunkwise probe``,
the demo and the tests use the same functions, so the expected output of a
scenario is never written down twice.

Pure data and pure functions: no I/O, no trio.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

__all__ = [
    "CREATED",
    "DEFAULT_SCENARIO",
    "INVALID_SCENARIO",
    "SCENARIOS",
    "SPOKEN",
    "AudioScript",
    "Scenario",
    "ToolCallScript",
    "WireStyle",
    "pcm16_chunks",
    "scenario_body",
    "scenario_chunks",
    "scenario_events",
    "split_events",
    "wire_json",
]

DEFAULT_SCENARIO = "text"
#: The scenario whose structured answer breaks the request's schema.
INVALID_SCENARIO = "structured-invalid"

#: ``created`` of every generated chunk: a fixed value keeps the output reproducible.
CREATED = 1735689600
_FINGERPRINT = "fp_chunkwise"
_PROMPT_TOKENS = 19

# json.dumps with arguments builds a new encoder at every call: a fifth of the
# cost of a chunk, a hundred times an answer.
_WIRE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def wire_json(payload: Any) -> str:
    """``payload`` as the server writes it: compact JSON, text as is (not ``\\u``-escaped)."""
    return _WIRE_ENCODER.encode(payload)


# -- scenarios: what is said ---------------------------------------------------


@attrs.frozen(kw_only=True)
class ToolCallScript:
    """One tool call of a scenario, with its arguments as they are streamed."""

    id: str
    name: str
    fragments: tuple[str, ...]

    @property
    def arguments(self) -> str:
        """The complete arguments text."""
        return "".join(self.fragments)


@attrs.frozen(kw_only=True)
class AudioScript:
    """Spoken output of a scenario: its audio in base64 chunks, and its transcript's pieces.

    Chat streams it in ``delta.audio`` (:func:`scenario_chunks`), the Responses
    API in ``response.audio.*`` events; the audio is PCM16 (24 kHz, mono, little
    endian), the only format OpenAI streams, each chunk whole samples, so each
    decodes on its own, as OpenAI's do.
    """

    id: str
    chunks: tuple[str, ...]
    transcript: tuple[str, ...]
    expires_at: int

    @property
    def data(self) -> str:
        """The whole audio, base64 (the chunks joined: each is a multiple of 4 characters)."""
        return "".join(self.chunks)

    @property
    def transcript_text(self) -> str:
        """The complete transcript."""
        return "".join(self.transcript)


def pcm16_chunks(samples: int, per_chunk: int) -> tuple[str, ...]:
    """A quiet 440 Hz tone of ``samples`` PCM16 samples at 24 kHz, base64, ``per_chunk`` a chunk.

    ``per_chunk`` is a multiple of 3 (six bytes), so every chunk is base64 without padding
    and the chunks join into the base64 of the whole.
    """
    if per_chunk % 3:
        raise ValueError("per_chunk must be a multiple of 3")
    pcm = b"".join(
        struct.pack("<h", round(3000 * math.sin(2 * math.pi * 440 * i / 24000)))
        for i in range(samples)
    )
    size = per_chunk * 2
    return tuple(
        base64.b64encode(pcm[start : start + size]).decode() for start in range(0, len(pcm), size)
    )


ToolStyle = Literal["fragmented", "whole", "null-index"]
UsageStyle = Literal["separate", "last-chunk"]


@attrs.frozen(kw_only=True)
class WireStyle:
    """How a provider writes a stream.

    Attributes:
        tools: ``"fragmented"`` (OpenAI: the first delta of a call has its
            ``index``, ``id`` and name, later ones only ``index`` and an
            arguments fragment), ``"whole"`` (Ollama: every call complete in one
            delta) or ``"null-index"`` (no usable index: the opening delta has
            ``"index": null`` and the id, continuations have neither).
        usage: ``"separate"`` (OpenAI: a final ``choices: []`` chunk) or
            ``"last-chunk"`` (usage on the chunk carrying the last finish_reason).
            Either way, usage is sent only when ``stream_options.include_usage``
            asks for it.
        keepalive: send ``: keep-alive`` comments before the first chunk and
            between chunks.
        data_prefix: ``"data: "``, or ``"data:"`` as some servers write it.
        line_ending: ``"\\n"``, ``"\\r\\n"`` or ``"\\r"``.
        moderation: send the chunk and choice fields a client does not
            model, as OpenAI and Azure add them: ``service_tier`` and an
            ``obfuscation`` string on every chunk, Azure's
            ``content_filter_results`` on every choice and
            ``prompt_filter_results`` on the first chunk, and a ``moderation``
            chunk (``choices: []``) after the last finish_reason.
    """

    tools: ToolStyle = "fragmented"
    usage: UsageStyle = "separate"
    keepalive: bool = False
    data_prefix: str = "data: "
    line_ending: str = "\n"
    moderation: bool = False


@attrs.frozen(kw_only=True)
class Scenario:
    """A scripted assistant reply, and the wire style it is sent in.

    Attributes:
        name: the model name that selects it.
        summary: one line for ``/v1/models`` and ``--help``.
        reasoning: reasoning text pieces (sent as ``reasoning_content``).
        content: content text pieces, one delta each.
        tool_calls: tool calls, sent after the content.
        function_call: a legacy ``delta.function_call`` (deprecated by
            ``tool_calls``, still sent by OpenAI to a request with
            ``functions``, and by servers that copied it): its name, then its
            argument fragments; its ``id`` is not sent.
        audio: spoken output, sent in ``delta.audio`` after the content: the
            id with the first transcript piece, the other pieces, the data
            chunks, and, after the finish_reason, an update with only
            ``expires_at`` (as openai-python documents the last one).
        finish_reason: sent on each choice's last chunk.
        usage: completion-side token counts for one choice (``completion_tokens``
            and any details); prompt and total counts are added when sent.
        error: when set, this error object is sent as a mid-stream
            ``{"error": ...}`` payload after the content, and the stream ends
            there: no finish_reason, no usage, no ``[DONE]``.
        style: see :class:`WireStyle`.
    """

    name: str
    summary: str
    reasoning: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    tool_calls: tuple[ToolCallScript, ...] = ()
    function_call: ToolCallScript | None = None
    audio: AudioScript | None = None
    finish_reason: str = "stop"
    # The mappings are compared but not hashed, so a scenario is hashable
    # (scenario_events caches by it) and two differing only there are unequal.
    usage: Mapping[str, Any] = attrs.field(factory=lambda: {"completion_tokens": 20}, hash=False)
    error: Mapping[str, Any] | None = attrs.field(default=None, hash=False)
    style: WireStyle = WireStyle()

    @property
    def text(self) -> str:
        """The complete content of one choice."""
        return "".join(self.content)

    @property
    def reasoning_text(self) -> str | None:
        """The complete reasoning of one choice, or None when there is none."""
        return "".join(self.reasoning) if self.reasoning else None


_TEXT = (
    "Hello! ",
    "This reply streams ",
    "in small pieces, ",
    "the way a model writes it. ",
    "Multibyte characters survive every split: ",
    "café, naïve, ",
    "日本語のテキスト, ",
    "and emoji 🎉🚀👩‍💻. ",
    "That's all.",
)

_WEATHER_CALLS = (
    ToolCallScript(
        id="call_chunkwise_paris",
        name="get_weather",
        fragments=('{"ci', 'ty": "Pa', 'ris", "un', 'it": "cel', 'sius"}'),
    ),
    ToolCallScript(
        id="call_chunkwise_tokyo",
        name="get_weather",
        fragments=('{"city"', ': "東', '京", "unit": ', '"celsius"', "}"),
    ),
)

#: The spoken answer of the ``audio`` scenarios (chat and Responses): 20 ms of a
#: tone in four chunks, and its transcript.
SPOKEN = AudioScript(
    id="audio_chunkwise",
    chunks=pcm16_chunks(480, 120),
    transcript=("Hello! ", "This answer ", "is spoken — ", "and written: café."),
    expires_at=CREATED + 3600,
)

_ERROR = {
    "message": "The server had an error while processing your request. Sorry about that!",
    "type": "server_error",
    "param": None,
    "code": None,
}


def _text_scenario(name: str, summary: str, style: WireStyle) -> Scenario:
    return Scenario(
        name=name, summary=summary, content=_TEXT, usage={"completion_tokens": 42}, style=style
    )


def _tools_scenario(name: str, summary: str, style: WireStyle) -> Scenario:
    return Scenario(
        name=name,
        summary=summary,
        tool_calls=_WEATHER_CALLS,
        finish_reason="tool_calls",
        usage={"completion_tokens": 36},
        style=style,
    )


_ALL_SCENARIOS = (
    _text_scenario(
        "text", "a few sentences with multibyte characters (é, 日本語, emoji)", WireStyle()
    ),
    _tools_scenario(
        "tools",
        "two parallel get_weather calls with fragmented arguments; finish tool_calls",
        WireStyle(),
    ),
    Scenario(
        name="reasoning",
        summary="reasoning_content first, then the content",
        reasoning=(
            "The user wants a short answer. ",
            "Two plus two is four; ",
            "say so plainly.",
        ),
        content=("2 + 2 = ", "4."),
        usage={"completion_tokens": 24, "completion_tokens_details": {"reasoning_tokens": 18}},
    ),
    Scenario(
        name="length",
        summary="text cut off by the token limit: finish_reason length",
        content=("Once upon a time, ", "in a land far, ", "far away, there"),
        finish_reason="length",
        usage={"completion_tokens": 16},
    ),
    Scenario(
        name="error",
        summary="some text, then a mid-stream error payload and no [DONE]",
        content=("Let me think about ", "that for a "),
        error=_ERROR,
    ),
    Scenario(
        name="demo",
        summary="multibyte text, then one get_weather call; finish tool_calls (chunkwise demo)",
        content=(
            "Bonjour ! ",
            "I can check ",
            "the weather ",
            "in Zürich ",
            "for you — ",
            "and say hello ",
            "in 日本語: ",
            "こんにちは ",
            "☀️🌧️ ",
            "One moment…",
        ),
        tool_calls=(
            ToolCallScript(
                id="call_chunkwise_demo",
                name="get_weather",
                fragments=('{"ci', 'ty": "Zü', 'rich", ', '"unit": "cel', 'sius"}'),
            ),
        ),
        finish_reason="tool_calls",
        usage={"completion_tokens": 31},
    ),
    Scenario(
        name=INVALID_SCENARIO,
        summary="JSON that breaks the request's response_format schema (without one: cut JSON)",
        content=('{"city": "Zü', 'rich", "un', 'it": "cel'),
        usage={"completion_tokens": 12},
    ),
    Scenario(
        name="audio",
        summary="spoken output: delta.audio with its id, transcript, PCM16 data, then expires_at",
        audio=SPOKEN,
        usage={
            "completion_tokens": 46,
            "completion_tokens_details": {"audio_tokens": 40, "reasoning_tokens": 0},
        },
    ),
    Scenario(
        name="function-call",
        summary="the legacy delta.function_call (name, then arguments); finish function_call",
        function_call=_WEATHER_CALLS[0],
        finish_reason="function_call",
        usage={"completion_tokens": 18},
    ),
    _text_scenario(
        "moderation",
        "the text scenario with service_tier, obfuscation, Azure's filter results, moderation",
        WireStyle(moderation=True),
    ),
    _text_scenario(
        "quirks-keepalive",
        "the text scenario with ': keep-alive' comments between events",
        WireStyle(keepalive=True),
    ),
    _text_scenario(
        "quirks-nospace",
        "the text scenario written 'data:' without a space",
        WireStyle(data_prefix="data:"),
    ),
    _text_scenario(
        "quirks-crlf", "the text scenario with CRLF line endings", WireStyle(line_ending="\r\n")
    ),
    _tools_scenario(
        "quirks-whole-tools",
        "the tools scenario with both calls whole in one delta (like Ollama)",
        WireStyle(tools="whole"),
    ),
    _tools_scenario(
        "quirks-null-index",
        "the tools scenario with null/missing tool index; a new id opens a call",
        WireStyle(tools="null-index"),
    ),
    _text_scenario(
        "quirks-usage-last-chunk",
        "the text scenario with usage on the last content chunk, not a separate chunk",
        WireStyle(usage="last-chunk"),
    ),
)

#: The built-in scenarios by name, in the order ``/v1/models`` lists them.
SCENARIOS: Mapping[str, Scenario] = {s.name: s for s in _ALL_SCENARIOS}


# -- scenarios on the wire -----------------------------------------------------


def _tool_deltas(calls: Sequence[ToolCallScript], style: ToolStyle) -> list[dict[str, Any]]:
    """The deltas that stream ``calls`` in ``style`` (see :class:`WireStyle`)."""
    if not calls:
        return []
    if style == "whole":
        return [
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for index, call in enumerate(calls)
                ]
            }
        ]
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        if style == "null-index":
            # The opening delta says "index": null, continuations leave it out:
            # both spellings occur, and only the id tells the calls apart.
            first, rest = call.fragments[0], call.fragments[1:]
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": None,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": first},
                        }
                    ]
                }
            )
            deltas.extend({"tool_calls": [{"function": {"arguments": f}}]} for f in rest)
            continue
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        deltas.extend(
            {"tool_calls": [{"index": index, "function": {"arguments": f}}]} for f in call.fragments
        )
    return deltas


def _usage(scenario: Scenario, n: int) -> dict[str, Any]:
    completion = int(scenario.usage.get("completion_tokens", 0)) * n
    usage: dict[str, Any] = {
        "prompt_tokens": _PROMPT_TOKENS,
        "completion_tokens": completion,
        "total_tokens": _PROMPT_TOKENS + completion,
    }
    for key, value in scenario.usage.items():
        if key != "completion_tokens":
            usage[key] = value
    return usage


def _audio_deltas(audio: AudioScript | None) -> list[dict[str, Any]]:
    """The ``delta.audio`` updates before the finish: the id with the first words, the
    other words, the data chunks."""
    if audio is None:
        return []
    first, *rest = audio.transcript or ("",)
    deltas: list[dict[str, Any]] = [
        {"content": None, "audio": {"id": audio.id, "transcript": first}}
    ]
    deltas += [{"audio": {"transcript": piece}} for piece in rest]
    deltas += [{"audio": {"data": chunk}} for chunk in audio.chunks]
    return deltas


def _function_call_deltas(call: ToolCallScript | None) -> list[dict[str, Any]]:
    """A legacy ``delta.function_call``: the name (arguments empty), then each fragment."""
    if call is None:
        return []
    deltas: list[dict[str, Any]] = [{"function_call": {"name": call.name, "arguments": ""}}]
    deltas += [{"function_call": {"arguments": fragment}} for fragment in call.fragments]
    return deltas


_FILTERS_SAFE = {
    name: {"filtered": False, "severity": "safe"}
    for name in ("hate", "self_harm", "sexual", "violence")
}
_MODERATION_CATEGORIES = ("harassment", "hate", "self-harm", "sexual", "violence")
# Padding of OpenAI's obfuscation field: random there, varied in length here,
# the same for a given chunk so the output stays reproducible.
_OBFUSCATION = "q8Xr2LmT0vKw"


def _moderation_results() -> dict[str, Any]:
    """One side (input or output) of a ``moderation`` chunk: nothing flagged."""
    model = "omni-moderation-latest"
    result = {
        "type": "moderation_result",
        "model": model,
        "flagged": False,
        "categories": dict.fromkeys(_MODERATION_CATEGORIES, False),
        "category_scores": dict.fromkeys(_MODERATION_CATEGORIES, 0.0001),
        "category_applied_input_types": {name: ["text"] for name in _MODERATION_CATEGORIES},
    }
    return {"type": "moderation_results", "model": model, "results": [result]}


def _moderated(chunks: list[dict[str, Any]], envelope: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``chunks`` with the fields of :attr:`WireStyle.moderation`, and the moderation chunk."""
    last_finish = max(
        position
        for position, chunk in enumerate(chunks)
        if any(choice.get("finish_reason") for choice in chunk["choices"])
    )
    moderation = {
        **envelope,
        "choices": [],
        "moderation": {"input": _moderation_results(), "output": _moderation_results()},
    }
    if "usage" in chunks[0]:
        moderation["usage"] = None
    chunks = [*chunks[: last_finish + 1], moderation, *chunks[last_finish + 1 :]]
    for position, chunk in enumerate(chunks):
        if position == 0:
            # Azure sends its prompt's filter results once, first.
            chunk["prompt_filter_results"] = [
                {"prompt_index": 0, "content_filter_results": _FILTERS_SAFE}
            ]
        for choice in chunk["choices"]:
            # Azure's role chunk has empty results; the others every category.
            choice["content_filter_results"] = {} if "role" in choice["delta"] else _FILTERS_SAFE
        chunk["service_tier"] = "default"
        chunk["obfuscation"] = _OBFUSCATION[: 1 + position % len(_OBFUSCATION)]
    return chunks


def scenario_chunks(
    scenario: Scenario,
    *,
    n: int = 1,
    include_usage: bool = False,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """The JSON payloads a scenario streams, in order (``[DONE]`` not included).

    Each chunk carries one choice; with ``n`` > 1 the choices take turns, step
    by step.  With ``include_usage`` every chunk has ``"usage": null`` and the
    usage arrives as the style says.  An error scenario ends with its
    ``{"error": ...}`` payload.  A spoken answer's last audio update (only
    ``expires_at``, no ``finish_reason`` at all) comes after the finish.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    envelope: dict[str, Any] = {
        "id": f"chatcmpl-chunkwise-{scenario.name}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model if model is not None else scenario.name,
        "system_fingerprint": _FINGERPRINT,
    }
    steps: list[tuple[dict[str, Any], str | None]] = [({"role": "assistant", "content": ""}, None)]
    # DeepSeek writes "content": null beside each reasoning piece.
    steps += [({"content": None, "reasoning_content": p}, None) for p in scenario.reasoning]
    steps += [({"content": p}, None) for p in scenario.content]
    trailer: dict[str, Any] | None = None
    if scenario.error is None:
        steps += [(d, None) for d in _audio_deltas(scenario.audio)]
        steps += [(d, None) for d in _function_call_deltas(scenario.function_call)]
        steps += [(d, None) for d in _tool_deltas(scenario.tool_calls, scenario.style.tools)]
        steps.append(({}, scenario.finish_reason))
        if scenario.audio is not None:
            trailer = {"audio": {"expires_at": scenario.audio.expires_at}}
    chunks: list[dict[str, Any]] = []

    def add(choices: list[dict[str, Any]]) -> None:
        chunk = {**envelope, "choices": choices}
        if include_usage:
            chunk["usage"] = None
        chunks.append(chunk)

    for delta, finish_reason in steps:
        for index in range(n):
            add(
                [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
            )
    if trailer is not None:
        for index in range(n):
            add([{"index": index, "delta": trailer}])  # no finish_reason, not even null
    if scenario.error is not None:
        chunks.append({"error": dict(scenario.error)})
    elif include_usage:
        if scenario.style.usage == "last-chunk":
            chunks[-1]["usage"] = _usage(scenario, n)
        else:
            chunks.append({**envelope, "choices": [], "usage": _usage(scenario, n)})
    if scenario.style.moderation and scenario.error is None:
        chunks = _moderated(chunks, envelope)
    return chunks


def scenario_events(
    scenario: Scenario,
    *,
    n: int = 1,
    include_usage: bool = False,
    model: str | None = None,
) -> list[bytes]:
    """The exact bytes of each SSE event the scenario sends (comments count as events)."""
    return list(_events(scenario, n, include_usage, model))


# Pure, and a server answers one scenario again and again: encoding a 100-token
# answer costs about 300 us, which a paced server paid for every request of a
# wave of starts at once, while the tokens of the streams still running waited.
# The bound keeps long answers (25 KB per 100 tokens) from piling up.
@functools.lru_cache(maxsize=16)
def _events(
    scenario: Scenario, n: int, include_usage: bool, model: str | None
) -> tuple[bytes, ...]:
    style = scenario.style
    eol = style.line_ending
    keepalive = f": keep-alive{eol}{eol}".encode()
    payloads = [
        wire_json(chunk)
        for chunk in scenario_chunks(scenario, n=n, include_usage=include_usage, model=model)
    ]
    if scenario.error is None:
        payloads.append("[DONE]")
    events: list[bytes] = []
    for position, payload in enumerate(payloads):
        if style.keepalive and position % 3 == 0:
            events.append(keepalive)
        events.append(f"{style.data_prefix}{payload}{eol}{eol}".encode())
    return tuple(events)


def scenario_body(
    scenario: Scenario,
    *,
    n: int = 1,
    include_usage: bool = False,
    model: str | None = None,
) -> bytes:
    """The whole SSE body of a scenario."""
    return b"".join(scenario_events(scenario, n=n, include_usage=include_usage, model=model))


_EVENT_RE = re.compile(rb".*?(?:\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n)|.+", re.DOTALL)


def split_events(body: bytes) -> list[bytes]:
    """Split a recorded SSE body after each blank line, keeping every byte.

    Only used to pace a replay (``--delay`` between events), so a blank line
    spelled with mixed line endings is good enough to find.
    """
    return [match.group() for match in _EVENT_RE.finditer(body)]


# -- stream to document --------------------------------------------------------
