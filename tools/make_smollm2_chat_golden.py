#!/usr/bin/env python3
"""Golden chat-template fixture for SmolLM2-135M-Instruct: transformers' apply_chat_template.

What it makes:

  tests/data/golden/smollm2-q4_1/chat.json
      {"reference", "tokenizer_source", "template", "bos_token", "eos_token", "cases": [...]}
        template     the model's chat template (Jinja, ChatML with <|im_start|> / <|im_end|>;
                     it inserts a default system prompt when the first message is not "system").
        cases        {name, messages, add_generation_prompt, continue_final_message (only where
                     set), text, ids, ids_equal_encode_of_text}:
                       text  apply_chat_template(messages, tokenize=False, ...)
                       ids   apply_chat_template(messages, tokenize=True, ...)["input_ids"]
                             (transformers 5 returns a BatchEncoding here, not a list)
                       ids_equal_encode_of_text
                             tokenizer(text, add_special_tokens=False).input_ids == ids
      Cases: one user turn, system + user, multi-turn, no generation prompt, unicode (accents,
      CJK, emoji), newlines / quotes / a literal "<|im_start|>" typed inside user text, and an
      assistant-last conversation continued with continue_final_message=True. A message whose
      content is a list of {"type": "text"} parts is not included: this template concatenates
      message['content'] as a string, and rendering such a message raises a TypeError.

The tokenizer comes from the Hugging Face-layout twin .cache/smollm2/hf-f16/ (tokenizer.json,
tokenizer_config.json, chat_template.jinja) when it is there, else from the GGUF file itself
(AutoTokenizer.from_pretrained(.cache/smollm2, gguf_file=SmolLM2-135M-Instruct.Q4_1.gguf)).
When both are there, the GGUF tokenizer is checked to give the same template, special tokens,
texts and ids.

Needs the model file (git-ignored; `scripts/fetch-model`, or see tools/make_smollm2_golden.py)
and transformers (5.x) with tokenizers (gguf too, to read the GGUF file). No model weights are
loaded; deterministic, re-runnable, takes seconds:

    python3 tools/make_smollm2_chat_golden.py
"""

import json
import os
import sys

import transformers
from transformers import AutoTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_DIR = os.path.join(REPO, ".cache", "smollm2")
HF_DIR = os.path.join(MODEL_DIR, "hf-f16")
Q4_1_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT_DIR = os.path.join(REPO, "tests", "data", "golden", "smollm2-q4_1")

CASES = [
    {
        "name": "single_user_generation_prompt",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "add_generation_prompt": True,
    },
    {
        "name": "system_and_user",
        "messages": [
            {"role": "system", "content": "You are a terse assistant. Answer in one word."},
            {"role": "user", "content": "Name a primary color."},
        ],
        "add_generation_prompt": True,
    },
    {
        "name": "multi_turn",
        "messages": [
            {"role": "user", "content": "Hi!"},
            {"role": "assistant", "content": "Hello! How can I help you today?"},
            {"role": "user", "content": "Name three fruits."},
        ],
        "add_generation_prompt": True,
    },
    {
        "name": "no_generation_prompt",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "2 + 2 = 4."},
        ],
        "add_generation_prompt": False,
    },
    {
        "name": "unicode",
        "messages": [
            {"role": "user",
             "content": "Café crème, naïve façade, Ångström. 你好，世界！東京 "
                        "こんにちは 안녕하세요. Emoji: 🙂🚀👍🏽 and 👨‍👩‍👧."},
        ],
        "add_generation_prompt": True,
    },
    {
        "name": "newlines_quotes_literal_special_token",
        "messages": [
            {"role": "user",
             "content": "Line one\nLine two\n\n  indented \"double\" and 'single' quotes\t(tab)\n"
                        "Literal markers: <|im_start|>user\nfake turn<|im_end|> end.\n"},
        ],
        "add_generation_prompt": True,
    },
    {
        "name": "continue_final_message",
        "messages": [
            {"role": "user", "content": "Complete the sentence about Paris."},
            {"role": "assistant", "content": "Paris is the capital of"},
        ],
        "add_generation_prompt": False,
        "continue_final_message": True,
    },
    {
        "name": "empty_user_content",
        "messages": [{"role": "user", "content": ""}],
        "add_generation_prompt": True,
    },
]


def load():
    """(primary tokenizer, its source, GGUF tokenizer or None for the cross-check)."""
    gguf_path = os.path.join(MODEL_DIR, Q4_1_NAME)
    gguf_tok = None
    if os.path.exists(gguf_path):
        gguf_tok = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=Q4_1_NAME)
    if os.path.exists(os.path.join(HF_DIR, "tokenizer.json")):
        return AutoTokenizer.from_pretrained(HF_DIR), ".cache/smollm2/hf-f16", gguf_tok
    if gguf_tok is None:
        sys.exit(f"missing {gguf_path} (and {HF_DIR}): run scripts/fetch-model")
    return gguf_tok, f".cache/smollm2/{Q4_1_NAME}", None


def render(tok, case):
    kw = {"add_generation_prompt": case["add_generation_prompt"]}
    if "continue_final_message" in case:
        kw["continue_final_message"] = case["continue_final_message"]
    text = tok.apply_chat_template(case["messages"], tokenize=False, **kw)
    enc = tok.apply_chat_template(case["messages"], tokenize=True, **kw)
    ids = enc["input_ids"] if hasattr(enc, "keys") else enc  # BatchEncoding in transformers 5
    assert isinstance(text, str) and all(isinstance(i, int) for i in ids), (type(text), ids)
    return text, list(ids)


def main():
    tok, source, gguf_tok = load()
    template = tok.chat_template
    assert isinstance(template, str) and "<|im_start|>" in template, template
    print("chat template:\n" + template)
    print(f"bos {tok.bos_token!r}  eos {tok.eos_token!r}")

    cases = []
    for c in CASES:
        text, ids = render(tok, c)
        equal = tok(text, add_special_tokens=False).input_ids == ids
        if gguf_tok is not None:
            assert render(gguf_tok, c) == (text, ids), f"{c['name']}: GGUF tokenizer differs"
        out = {"name": c["name"], "messages": c["messages"],
               "add_generation_prompt": c["add_generation_prompt"]}
        if "continue_final_message" in c:
            out["continue_final_message"] = c["continue_final_message"]
        out.update(text=text, ids=ids, ids_equal_encode_of_text=equal)
        cases.append(out)
        print(f"  {c['name']}: {len(ids)} ids, ids == encode(text): {equal}")

    # list-of-parts content: included only if this template can render it
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    try:
        tok.apply_chat_template(parts, tokenize=False, add_generation_prompt=True)
        print("note: list-of-parts content renders; consider adding a case")
    except Exception as e:  # noqa: BLE001  (the template's own error, e.g. str + list)
        print(f"list-of-parts content skipped: {type(e).__name__}: {e}")

    if gguf_tok is not None:
        assert gguf_tok.chat_template == template
        assert (gguf_tok.bos_token, gguf_tok.eos_token) == (tok.bos_token, tok.eos_token)
        print("GGUF tokenizer: same template, special tokens, texts and ids")

    fixture = {
        "reference": f"transformers {transformers.__version__} apply_chat_template",
        "tokenizer_source": source,
        "template": template,
        "bos_token": tok.bos_token,
        "eos_token": tok.eos_token,
        "cases": cases,
    }
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, "chat.json")
    with open(path, "w") as f:
        json.dump(fixture, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {os.path.relpath(path, os.getcwd())} ({os.path.getsize(path)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
