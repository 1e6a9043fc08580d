"""The legacy completions endpoint's answers (``POST /v1/completions``), as chunks on the wire.

Theory of operation
-------------------
A completions request is answered from the chat scenario its ``model`` names
(:mod:`._scenarios`): the same text pieces, ``finish_reason``, usage and
mid-stream error, written as ``text_completion`` chunks.  Three more model
names choose a server's wire style for the ``text`` scenario
(:data:`COMPLETION_STYLES`): ``quirks-vllm``, ``quirks-llama.cpp`` and
``quirks-tgi``; every other name is OpenAI's style.  A non-streamed request
gets the document the stream reconstructs (:func:`text_completion_document`), so
the two answers cannot drift apart.

Rules
-----
1. Choices: one per prompt and per ``n``, index ``prompt * n + j`` (OpenAI's
   order); they take turns, piece by piece.  A prompt is a string, an array
   of strings, an array of token ids (one prompt) or an array of such arrays.
2. ``echo``: each choice's first piece is its prompt text (a token-id prompt
   echoes its ids, space-separated).  ``suffix`` is accepted (a string): the
   pieces are the insertion, as OpenAI returns it.
3. ``logprobs: k`` gives each piece one token's logprobs with ``k``
   alternatives, in the style's shape: OpenAI's and vLLM's legacy lists
   (``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``),
   llama.cpp's chat-style ``content`` list; TGI sends ``null``.
4. The styles' quirks, each as the real server sends it: vLLM adds
   ``stop_reason`` to each choice; llama.cpp opens a multi-prompt stream with
   ``data: null``, puts ``usage`` and ``timings`` on its last chunk and
   always sends usage; TGI sends ``"id": ""``, ``finish_reason: ""`` until the
   end, ``eos_token`` for a stop, and its usage on its last chunk.
5. Usage (OpenAI, vLLM) comes in a final ``choices: []`` chunk with
   ``stream_options.include_usage``, and always in a document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from chunkwise import completions

from ._scenarios import CREATED, SCENARIOS, Scenario, wire_json

__all__ = [
    "COMPLETION_STYLES",
    "CompletionStyle",
    "completion_chunks",
    "completion_events",
    "text_completion_document",
]

CompletionStyle = Literal["openai", "vllm", "llama.cpp", "tgi"]
#: The model names that choose a server's style (with the ``text`` scenario).
COMPLETION_STYLES: Final[Mapping[str, CompletionStyle]] = {
    "quirks-vllm": "vllm",
    "quirks-llama.cpp": "llama.cpp",
    "quirks-tgi": "tgi",
}
_FINGERPRINTS: Final[Mapping[CompletionStyle, str | None]] = {
    "openai": "fp_chunkwise",
    "vllm": None,
    "llama.cpp": "b4500-chunkwise",
    "tgi": "3.0.0-native",
}
_PROMPT_TOKENS = 5


def _prompts(prompt: Any) -> list[str]:
    """Rule 1: each prompt's text (token ids as their space-separated numbers)."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, int) for p in prompt):
            return [" ".join(map(str, prompt))]
        return [p if isinstance(p, str) else " ".join(map(str, p)) for p in prompt]
    return [""]


def _logprobs(style: CompletionStyle, piece: str, offset: int, k: int) -> Any:
    """Rule 3: one token's logprobs for ``piece`` in the style's shape."""
    alternatives = [f"{piece}#{i}" for i in range(1, k)]
    if style == "tgi":
        return None
    if style == "llama.cpp":
        top = [{"token": piece, "logprob": -0.25, "bytes": list(piece.encode())}]
        top += [
            {"token": a, "logprob": -2.0 - i, "bytes": list(a.encode())}
            for i, a in enumerate(alternatives)
        ]
        entry = {"id": offset, "token": piece, "logprob": -0.25, "bytes": list(piece.encode())}
        return {"content": [{**entry, "top_logprobs": top[:k]}]}
    top_map = {piece: -0.25, **{a: -2.0 - i for i, a in enumerate(alternatives)}}
    return {
        "tokens": [piece],
        "token_logprobs": [-0.25],
        "top_logprobs": [dict(list(top_map.items())[:k])] if k else None,
        "text_offset": [offset],
    }


def completion_chunks(
    body: Mapping[str, Any], scenario: Scenario, style: CompletionStyle, *, document: bool
) -> list[Any]:
    """The JSON payloads of a completions answer, in order (``[DONE]`` not included).

    ``document``: the answer is for a non-streamed request (rule 5: usage
    always).  A ``None`` payload is llama.cpp's ``data: null`` (rule 4).
    """
    model = body.get("model")
    n = body.get("n") or 1
    k = body.get("logprobs")
    options = body.get("stream_options")
    include_usage = document or (
        isinstance(options, Mapping) and options.get("include_usage") is True
    )
    prompts = _prompts(body.get("prompt"))
    envelope: dict[str, Any] = {
        "id": "" if style == "tgi" else f"cmpl-chunkwise-{scenario.name}",
        "object": "text_completion",
        "created": CREATED,
        "model": model if isinstance(model, str) else scenario.name,
    }
    if _FINGERPRINTS[style] is not None:
        envelope["system_fingerprint"] = _FINGERPRINTS[style]
    count = len(prompts) * n
    pieces: list[list[str]] = [
        ([prompts[i // n]] if body.get("echo") is True and prompts[i // n] else [])
        + list(scenario.content)
        for i in range(count)
    ]
    not_sent = "" if style == "tgi" else None
    finish = scenario.finish_reason
    if style == "tgi" and finish == "stop":
        finish = "eos_token"
    chunks: list[Any] = [None] if style == "llama.cpp" and len(prompts) > 1 else []
    offsets = [0] * count
    for step in range(max((len(p) for p in pieces), default=0)):
        for index in range(count):
            if step >= len(pieces[index]):
                continue
            piece = pieces[index][step]
            choice: dict[str, Any] = {
                "index": index,
                "text": piece,
                "logprobs": None if k is None else _logprobs(style, piece, offsets[index], k),
                "finish_reason": not_sent,
            }
            if style == "vllm":
                choice["stop_reason"] = None
            offsets[index] += len(piece)
            chunks.append({**envelope, "choices": [choice]})
    if scenario.error is not None:
        chunks.append({"error": dict(scenario.error)})
        return chunks
    completion = int(scenario.usage.get("completion_tokens", 0)) * count
    usage = {
        "prompt_tokens": _PROMPT_TOKENS * len(prompts),
        "completion_tokens": completion,
        "total_tokens": _PROMPT_TOKENS * len(prompts) + completion,
    }
    last = [
        {"index": index, "text": "", "logprobs": None, "finish_reason": finish}
        for index in range(count)
    ]
    if style == "vllm":
        for choice in last:
            choice["stop_reason"] = None
    ends = [{**envelope, "choices": [choice]} for choice in last]
    if style == "llama.cpp":
        ends[-1]["usage"] = usage
        ends[-1]["timings"] = {"prompt_n": usage["prompt_tokens"], "predicted_n": completion}
    elif style == "tgi":
        ends[-1]["usage"] = usage
    elif include_usage:
        ends.append({**envelope, "choices": [], "usage": usage})
    return chunks + ends


def completion_events(body: Mapping[str, Any], *, document: bool = False) -> list[bytes]:
    """The SSE events that answer a completions request ``body`` (already checked)."""
    model = body.get("model")
    name = model if isinstance(model, str) else ""
    style = COMPLETION_STYLES.get(name, "openai")
    scenario = SCENARIOS.get(name)
    if scenario is None or not scenario.content:
        scenario = SCENARIOS["text"]  # a style's name, or a tool scenario: no text
    payloads = [
        wire_json(chunk) for chunk in completion_chunks(body, scenario, style, document=document)
    ]
    if scenario.error is None:
        payloads.append("[DONE]")
    return [f"data: {payload}\n\n".encode() for payload in payloads]


def text_completion_document(events: Sequence[bytes]) -> tuple[completions.Result, dict[str, Any]]:
    """The stream parsed, and the ``text_completion`` document it makes."""
    parser = completions.Parser()
    parser.feed(b"".join(events))
    parser.end()
    result = parser.result
    document: dict[str, Any] = {
        "id": result.id or "",
        "object": "text_completion",
        "created": result.created,
        "model": result.model,
        "choices": [
            {
                "text": choice.text,
                "index": choice.index,
                "logprobs": None if choice.logprobs is None else dict(choice.logprobs),
                "finish_reason": choice.finish_reason,
            }
            for choice in result.choices
        ],
        "usage": None if result.usage is None else dict(result.usage),
    }
    if result.system_fingerprint is not None:
        document["system_fingerprint"] = result.system_fingerprint
    return result, document
