#!/usr/bin/env python3
"""Write a tiny llama-architecture GGUF model for llama.cpp's llama-server.

No download is needed: every weight is generated here with fixed seeds, so two
runs write byte-identical files.

Two flavours:

  default ("scripted"): all tensors hold small random values (std 0.02), plus a
      hand-placed structure in token_embd / output / layer-0 attention that
      turns the network into a bigram lookup with a tool-mode switch, so that
      greedy decoding (temperature 0) gives a known answer:

        chat without tools -> content
            'Hello world!\\nThe tiny model streams café, 日本語 🙂 "quotes" '
            'back\\slash and jalapeño 😀.'
            then <|im_end|> (finish_reason "stop"), 28 completion tokens.
            "ñ" and "😀" are not in the vocabulary: they come out as byte-fallback
            tokens (<0xC3><0xB1>, <0xF0><0x9F><0x98><0x80>), i.e. one UTF-8
            character split over 2 and 4 tokens.
        chat with tools (prompt contains the <tools> token) -> text
            '<tool_call>\\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\\n</tool_call>'
            then <|im_end|>, which llama-server (--jinja, the default) turns
            into a tool call get_weather({"city": "Zürich"}).
        chat with tools after a tool result (<tool_response> in the prompt)
            -> the same plain-text answer as without tools.

      Any other last prompt token also leads into "Hello ...", so
      /v1/completions with any prompt gives the same sentence.

  --pure-random: only small random values, no structure.  Output is then
      arbitrary tokens, including lone byte-fallback tokens (invalid UTF-8).

Usage: make_model.py OUT.gguf [--pure-random] [--seed N] [--ctx N]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any

import numpy as np  # type: ignore[import-not-found, unused-ignore]

try:
    import gguf  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover
    sys.exit("pip install gguf numpy")

N_EMBD = 64
N_LAYER = 2
N_HEAD = 4
N_HEAD_KV = 4
HEAD_DIM = N_EMBD // N_HEAD
N_FF = 128
NOISE = 0.02

CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n\' }}'
    "{%- else %}"
    "{%- if messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first)"
    " or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' }}{{- tool_call.name }}'
    "{{- '\", \"arguments\": ' }}{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

T = gguf.TokenType
SPECIAL = [
    ("<unk>", T.UNKNOWN),
    ("<s>", T.CONTROL),
    ("</s>", T.CONTROL),
    ("<|im_start|>", T.CONTROL),
    ("<|im_end|>", T.CONTROL),
    ("<tools>", T.USER_DEFINED),
    ("<tool_call>", T.USER_DEFINED),
    ("</tool_call>", T.USER_DEFINED),
    ("<tool_response>", T.USER_DEFINED),
    ("</tool_response>", T.USER_DEFINED),
]


def byte_tok(b: int) -> str:
    return f"<0x{b:02X}>"


# Greedy answer without tools. Each entry is a token text; the chain starts
# after the last prompt token "\n" (<0x0A>, end of "<|im_start|>assistant\n").
PLAIN_CHAIN = [
    "Hello",
    "▁world",
    "!\n",
    "The",
    "▁tiny",
    "▁model",
    "▁streams",
    "▁caf",
    "é",
    ",",
    "▁日本",
    "語",
    "▁🙂",
    '▁"quotes"',
    "▁back\\slash",
    "▁and",
    "▁jalape",
    byte_tok(0xC3),
    byte_tok(0xB1),  # ñ split over 2 tokens
    "o",
    "▁",
    byte_tok(0xF0),
    byte_tok(0x9F),
    byte_tok(0x98),
    byte_tok(0x80),  # 😀 split over 4
    ".",
    "<|im_end|>",
]
# Greedy answer when the prompt holds <tools> (and no <tool_response>).
TOOL_CHAIN = [
    "<tool_call>",
    '\n{"name":▁"',
    "get_weather",
    '",▁"arguments":▁{"',
    "city",
    '":▁"',
    "Zürich",
    '"}}\n',
    "</tool_call>",
    "<|im_end|>",
]
START = byte_tok(0x0A)

# Extra word pieces (with all their prefixes, so SentencePiece merges reach
# them) to make prompts shorter and tokenization look like a real model's.
WORDS = [
    "▁Hello",
    "▁world",
    "▁the",
    "▁hi",
    "hi",
    "Hi",
    "▁is",
    "▁a",
    "▁of",
    "▁and",
    "▁to",
    "▁in",
    "▁what",
    "▁weather",
    "▁Paris",
    "▁tiny",
    "▁model",
    "▁test",
    "▁you",
    "▁are",
    "▁helpful",
    "▁assistant",
    "user",
    "assistant",
    "system",
    "function",
    "name",
    "type",
    "object",
    "string",
    "description",
    "parameters",
    "properties",
    "required",
    "city",
    "get_weather",
    "▁function",
    "▁call",
    "▁tools",
    "▁json",
    "é",
    "日本",
    "語",
    "🙂",
]


def build_vocab() -> tuple[list[tuple[str, int]], list[float]]:
    toks: list[tuple[str, int]] = list(SPECIAL)
    toks += [(byte_tok(b), T.BYTE) for b in range(256)]
    seen = {t for t, _ in toks}

    def add(text: str) -> None:
        if text not in seen:
            seen.add(text)
            toks.append((text, T.NORMAL))

    for t in PLAIN_CHAIN + TOOL_CHAIN:
        add(t)
    for w in WORDS:
        for i in range(2, len(w) + 1):
            add(w[:i])
        add(w)
    scores = []
    for text, typ in toks:
        # SentencePiece merges the highest-scoring pair first: prefer long pieces.
        scores.append(float(len(text)) if typ == T.NORMAL else 0.0)
    return toks, scores


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out")
    ap.add_argument(
        "--pure-random", action="store_true", help="no scripted structure, random output"
    )
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--ctx", type=int, default=4096, help="llama.context_length (n_ctx_train)")
    a = ap.parse_args(argv)

    toks, scores = build_vocab()
    tid = {t: i for i, (t, _) in enumerate(toks)}
    n_vocab = len(toks)
    rng = np.random.default_rng(a.seed)

    def noise(*shape: int) -> Any:
        return (rng.standard_normal(shape) * NOISE).astype(np.float32)

    embd = noise(n_vocab, N_EMBD)
    out_w = noise(n_vocab, N_EMBD)
    layers = []
    for _ in range(N_LAYER):
        layers.append(
            {
                "attn_norm": np.ones(N_EMBD, np.float32),
                "attn_q": noise(N_HEAD * HEAD_DIM, N_EMBD),
                "attn_k": noise(N_HEAD_KV * HEAD_DIM, N_EMBD),
                "attn_v": noise(N_HEAD_KV * HEAD_DIM, N_EMBD),
                "attn_output": noise(N_EMBD, N_HEAD * HEAD_DIM),
                "ffn_norm": np.ones(N_EMBD, np.float32),
                "ffn_gate": noise(N_FF, N_EMBD),
                "ffn_up": noise(N_FF, N_EMBD),
                "ffn_down": noise(N_EMBD, N_FF),
            }
        )

    if not a.pure_random:
        # Residual-stream layout (n_embd = 64):
        #   0..47  one-hot identity of each chain token
        #   48     "any other token"
        #   49     constant 1 in every token
        #   50     <tools> marker        51  tool-mode flag (written by head 0)
        #   54     <tool_response> marker 53 tool-result flag (written by head 1)
        D_OTHER, D_CONST, D_TOOLS, D_FLAG, D_FLAG2, D_RESP = 48, 49, 50, 51, 53, 54
        chain_tokens = []
        for t in [START, *PLAIN_CHAIN, *TOOL_CHAIN]:
            if t not in chain_tokens:
                chain_tokens.append(t)
        assert len(chain_tokens) <= 48, len(chain_tokens)
        dim_of = {t: i for i, t in enumerate(chain_tokens)}

        embd[:, :56] = 0.0
        embd[:, D_CONST] = 1.0
        for i, (t, _) in enumerate(toks):
            if t in dim_of:
                embd[i, dim_of[t]] = 1.0
            else:
                embd[i, D_OTHER] = 1.0
        embd[tid["<tools>"], D_TOOLS] = 1.0
        embd[tid["<tool_response>"], D_RESP] = 1.0

        # Bigram successor table. Values are logit weights per unit of the
        # rms-normalised residual (a single active dim normalises to ~5.7).
        W_BIG, W_SMALL, W_FLAG, W_SUPPRESS = 7.5, 1.8, 2.2, 4.0
        out_w[:, :56] = 0.0
        succ = {}
        prev = START
        for t in PLAIN_CHAIN:
            succ[prev] = t
            prev = t
        succ["<|im_end|>"] = "Hello"  # only matters with ignore_eos
        for t, nxt in succ.items():
            w = W_SMALL if t == START else W_BIG
            out_w[tid[nxt], dim_of[t]] += w
        for before, t in itertools.pairwise(TOOL_CHAIN):
            out_w[tid[t], dim_of[before]] += W_BIG
        out_w[tid["Hello"], D_OTHER] += W_SMALL
        # tool mode: "<tool_call>" beats the weak "\n" -> "Hello" link but
        # loses to every strong chain link; a tool result switches it off.
        out_w[tid["<tool_call>"], D_FLAG] += W_FLAG
        out_w[tid["<tool_call>"], D_FLAG2] -= W_SUPPRESS

        # Layer 0, heads 0 and 1: constant query, key = marker, so the head
        # attends to the marker token wherever it is (or uniformly to nothing
        # when absent) and copies a flag into the residual.  Only rope pairs
        # >= 2 are used and rope.freq_base is huge, so rope is ~identity there.
        L0 = layers[0]
        for head, marker, flag in ((0, D_TOOLS, D_FLAG), (1, D_RESP, D_FLAG2)):
            rows = slice(head * HEAD_DIM, (head + 1) * HEAD_DIM)
            for m in ("attn_q", "attn_k", "attn_v"):
                L0[m][rows, :] = 0.0
            L0["attn_output"][:, rows] = 0.0
            for j in range(4, HEAD_DIM):
                L0["attn_q"][head * HEAD_DIM + j, D_CONST] = 0.5
                L0["attn_k"][head * HEAD_DIM + j, marker] = 0.5
            L0["attn_v"][head * HEAD_DIM + 0, marker] = 1.0
            L0["attn_output"][:, head * HEAD_DIM + 0] = 0.0
            L0["attn_output"][flag, head * HEAD_DIM + 0] = 0.35
        # keep the random parts from writing into the structured dims
        for L in layers:
            L["attn_output"][:56, 2 * HEAD_DIM :] = 0.0
            L["ffn_down"][:56, :] *= 0.1

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("tiny-random-llama" if a.pure_random else "tiny-scripted-llama")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(a.ctx)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0 if a.pure_random else 1e30)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)

    w.add_tokenizer_model("llama")
    w.add_token_list([t for t, _ in toks])
    w.add_token_scores(scores)
    w.add_token_types([int(ty) for _, ty in toks])
    w.add_unk_token_id(tid["<unk>"])
    w.add_bos_token_id(tid["<s>"])
    w.add_eos_token_id(tid["</s>"])
    w.add_eot_token_id(tid["<|im_end|>"])
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)
    w.add_chat_template(CHAT_TEMPLATE)

    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, np.float32))
    w.add_tensor("output.weight", out_w)
    for i, L in enumerate(layers):
        for k, v in L.items():
            w.add_tensor(f"blk.{i}.{k}.weight", np.ascontiguousarray(v))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(
        f"wrote {a.out}: n_vocab={n_vocab} n_embd={N_EMBD} n_layer={N_LAYER} "
        f"{'pure-random' if a.pure_random else 'scripted'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
