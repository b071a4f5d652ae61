#!/usr/bin/env python3
"""Golden fixture for the trained checkpoint models/opt-tiny-kjv-docs, from Hugging Face.

Writes tests/data/golden/opt-tiny-kjv-docs/expected.json and nothing else: the weights are not
copied, the tests load models/opt-tiny-kjv-docs itself. Unlike tools/make_golden.py (random
weights, random token ids) this checks offgen on a real vocabulary and real text, where the
activations, attention patterns and logit margins are those of a trained model.

The fixture holds (texts come from the checkpoint's held-out eval.jsonl):

  tokenizer  the full text of TOKENIZER_TEXTS and the ids of the checkpoint's GPT2Tokenizer
             (AutoTokenizer: "</s>" prepended as BOS, as offgen does for a "text" line);
  score      SCORE_TEXTS: each text's first N ids (BOS included) and log p(ids[i] | ids[:i])
             (token_logprobs[0] = null), rounded to 1e-5. Lengths differ so that a batch is
             left-padded; two reach all 1024 positions;
  generate   one batch of left-padded prompts of GEN_PROMPT_LENGTHS ids, each BOS + a window of
             an eval text, and the MAX_NEW_TOKENS tokens of greedy decoding (EOS disabled) from
             one batched model.generate call (checked against uncached greedy forwards). Every
             step of every row has a top1 - top2 logit gap of at least MIN_MARGIN, so offgen's
             fp16 rounding cannot flip a token; make_generate says how windows are picked.

References are OPTForCausalLM in fp32 (eager attention) on the fp16-stored weights, i.e. the
exact fp32 math of the checkpoint. For the tolerance of the tests the script also runs the model
in fp16 and records how far Hugging Face itself then is from the fp32 log-probs
(hf_fp16_max_abs_diff). Deterministic; CPU only; about four CPU-minutes.

    python3 tools/make_trained_golden.py
"""

import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, GenerationConfig, OPTForCausalLM

# Shared with the random-checkpoint fixtures (same folder; both use PAD = 1).
from make_golden import left_pad, margin_of

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_DIR = os.path.join(REPO, "models", "opt-tiny-kjv-docs")
OUT_PATH = os.path.join(REPO, "tests", "data", "golden", "opt-tiny-kjv-docs", "expected.json")

BOS, EOS, PAD = 2, 2, 1
TOKENIZER_TEXTS = (0, 1, 2, 22)  # kjv, linux-doc, python-doc, one with a non-ASCII character
# (eval.jsonl line, ids kept): 2 kjv, 2 linux-doc, 2 python-doc.
SCORE_TEXTS = ((0, 1024), (1, 1024), (2, 900), (3, 700), (4, 400), (5, 130))
GEN_PROMPT_LENGTHS = (8, 24, 64, 150)  # BOS included
GEN_OFFSETS = (1, 151, 301, 451)  # where prompt windows start in a text's ids (1: its start)
MAX_NEW_TOKENS = 32
MIN_MARGIN = 0.1  # top1 - top2 logits; offgen's log-probs are within 0.002 of the fixture

torch.use_deterministic_algorithms(True)
torch.set_num_threads(2)


def load_model():
    model = OPTForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32,
                                           attn_implementation="eager").eval()
    assert model.config._attn_implementation == "eager"
    assert model.lm_head.weight.data_ptr() == model.model.decoder.embed_tokens.weight.data_ptr()
    # The fp32 model is exactly the fp16 weights on disk, upcast.
    disk = load_file(os.path.join(MODEL_DIR, "model.safetensors"))
    state = model.state_dict()
    for name, value in disk.items():
        assert value.dtype == torch.float16, (name, value.dtype)
        assert torch.equal(state[name], value.float()), name
    assert set(state) - set(disk) <= {"lm_head.weight"}, sorted(set(state) - set(disk))
    return model


@torch.no_grad()
def logprobs(model, ids):
    """log p(ids[i] | ids[:i]) for i >= 1, one unpadded forward."""
    logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    return lp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]


@torch.no_grad()
def make_score(model, eval_ids):
    items, per_text = [], []
    for index, length in SCORE_TEXTS:
        ids = eval_ids[index][:length]
        assert len(ids) == length and ids[0] == BOS
        lp = logprobs(model, ids)
        per_text.append(lp)
        items.append({"eval_line": index, "token_ids": ids,
                      "token_logprobs": [None] + [round(float(x), 5) for x in lp]})
    # One left-padded batch (HF derives the positions from the mask) gives the same numbers.
    ids, mask = left_pad([item["token_ids"] for item in items])
    lp_all = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
    for b, item in enumerate(items):
        n = len(item["token_ids"])
        row = lp_all[b, ids.shape[1] - n:-1].gather(1, ids[b, ids.shape[1] - n + 1:, None])[:, 0]
        diff = (row - per_text[b]).abs().max().item()
        assert diff < 1e-4, f"left-padded batch differs on text {b}: {diff}"
    # How far Hugging Face in fp16 is from the fp32 reference (informs the tests' tolerance).
    half = OPTForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float16,
                                          attn_implementation="eager").eval()
    fp16_diff = max((logprobs(half, item["token_ids"]) - per_text[b]).abs().max().item()
                    for b, item in enumerate(items))
    return items, fp16_diff


@torch.no_grad()
def greedy(model, prompts):
    """One batched, left-padded model.generate call: new tokens and smallest margin per row."""
    ids, mask = left_pad(prompts)
    config = GenerationConfig(max_new_tokens=MAX_NEW_TOKENS, min_new_tokens=MAX_NEW_TOKENS,
                              do_sample=False, num_beams=1, eos_token_id=None, pad_token_id=PAD,
                              bos_token_id=BOS, return_dict_in_generate=True, output_logits=True)
    result = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    new = result.sequences[:, ids.shape[1]:]
    assert new.shape[1] == MAX_NEW_TOKENS == len(result.logits)
    margins = [float("inf")] * len(prompts)
    for t, step in enumerate(result.logits):
        for b in range(len(prompts)):
            assert int(new[b, t]) == int(step[b].argmax()), "generate is not plain greedy"
            margins[b] = min(margins[b], margin_of(step[b]))
    return new.tolist(), margins


@torch.no_grad()
def uncached_greedy(model, prompt):
    """Independent check: the same continuation from full forwards without a KV cache."""
    ids = list(prompt)
    for _ in range(MAX_NEW_TOKENS):
        ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt):]


def make_generate(model, eval_ids):
    """For each prompt length, of the windows BOS + ids[offset:offset + length - 1] of every eval
    text at every GEN_OFFSETS whose greedy margin is >= MIN_MARGIN, the one whose continuation
    has the most distinct tokens (then the largest margin), one window per text. The model's
    greedy continuations soon fall into loops ("and the LORD, and the LORD", newlines); this
    keeps the least degenerate ones."""
    prompts, picked, tried = [], [], 0
    for length in GEN_PROMPT_LENGTHS:
        best = None
        for offset in GEN_OFFSETS:
            # Equal-length windows of all texts: one unpadded batch.
            windows = [[BOS] + ids[offset:offset + length - 1] for ids in eval_ids]
            outputs, margins = greedy(model, windows)
            tried += len(windows)
            for line, (window, output, m) in enumerate(zip(windows, outputs, margins)):
                if m < MIN_MARGIN or EOS in output or line in [p[0] for p in picked]:
                    continue
                key = (len(set(output)), m)
                if best is None or key > best[0]:
                    best = (key, line, offset, window)
        if best is None:
            raise SystemExit(f"no window gives margin >= {MIN_MARGIN} at prompt length {length}")
        picked.append((best[1], best[2]))
        prompts.append(best[3])
    outputs, margins = greedy(model, prompts)
    # Left padding changes the numbers a little: the margins hold in the batch too.
    assert min(margins) >= MIN_MARGIN, margins
    for prompt, output in zip(prompts, outputs):
        assert uncached_greedy(model, prompt) == output
    return {
        "max_new_tokens": MAX_NEW_TOKENS,
        "eos_token_id": -1,
        "pad_token_id": PAD,
        "windows": [{"eval_line": line, "offset": offset} for line, offset in picked],
        "prompts": prompts,
        "outputs": outputs,
        "min_margin": round(min(margins), 6),
    }, tried


def dump(value, depth=0):
    """indent=1 JSON with each array of numbers on one line: readable, a third of the size."""
    inner, outer = " " * (depth + 1), " " * depth
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {dump(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + outer + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list, str)) for v in value):
        return "[\n" + ",\n".join(inner + dump(v, depth + 1) for v in value) + "\n" + outer + "]"
    return json.dumps(value)


def main():
    model = load_model()
    tok = AutoTokenizer.from_pretrained(MODEL_DIR)
    with open(os.path.join(MODEL_DIR, "eval.jsonl")) as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    eval_ids = [tok(t)["input_ids"] for t in texts]
    for t, ids in zip(texts, eval_ids):
        assert ids[0] == BOS and tok.decode(ids[1:]) == t

    score, fp16_diff = make_score(model, eval_ids)
    generate, tried = make_generate(model, eval_ids)
    expected = {
        "model": "opt-tiny-kjv-docs",
        "model_dir": "models/opt-tiny-kjv-docs",
        "weights_dtype": "float16",
        "reference": "transformers %s OPTForCausalLM, fp32, eager attention"
                     % __import__("transformers").__version__,
        "hf_fp16_max_abs_diff": round(fp16_diff, 5),
        "tokenizer": [{"eval_line": i, "text": texts[i], "ids": eval_ids[i]}
                      for i in TOKENIZER_TEXTS],
        "score": score,
        "generate": generate,
    }
    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    with open(OUT_PATH, "w") as f:
        f.write(dump(expected) + "\n")
    assert json.load(open(OUT_PATH)) == expected

    print(f"wrote {os.path.relpath(OUT_PATH, os.getcwd())} ({os.path.getsize(OUT_PATH)} bytes)")
    print(f"  score: {len(score)} texts, lengths {[len(s['token_ids']) for s in score]}")
    print(f"  Hugging Face fp16 vs fp32: max |logprob diff| {fp16_diff:.4f}")
    print(f"  generate: windows {generate['windows']}, min margin {generate['min_margin']:.3f} "
          f"({tried} candidates tried)")
    for prompt, output in zip(generate["prompts"], generate["outputs"]):
        print(f"    {tok.decode(prompt[-12:])!r} -> {tok.decode(output)!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
