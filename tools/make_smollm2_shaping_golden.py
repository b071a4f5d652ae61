#!/usr/bin/env python3
"""Golden greedy continuations of SmolLM2-135M-Instruct (its Q4_1 GGUF) with logit shaping, as
transformers generates them in fp32: the checks of offgen's penalties, logit_bias and min_tokens.

What it makes:

  tests/data/golden/smollm2-q4_1/shaping.json
      {"cases": [{name, prompt_ids, max_tokens, ignore_eos, repetition_penalty,
                  frequency_penalty, presence_penalty, logit_bias: {id: bias}, min_tokens,
                  output_ids, min_margin}], ...}

How each parameter is made in transformers:
  repetition_penalty   generate(repetition_penalty=...): Hugging Face's RepetitionPenaltyLogitsProcessor
                       over the prompt and the generated tokens (vLLM's definition is the same).
  frequency / presence vLLM's (and OpenAI's) definition, which transformers does not have, as a
                       LogitsProcessor: logits -= frequency * count(generated) and
                       logits -= presence * (count > 0), over the generated tokens only; it runs
                       after the repetition penalty, the order vLLM applies them in.
  logit_bias           a LogitsProcessor adding each bias (a case without other shaping, so the
                       order against the penalties does not matter).
  min_tokens           generate(min_new_tokens=...): EOS banned until that many tokens.

Each case is greedy, one sequence, EOS stopping unless ignore_eos. The output is cut at the first
step whose top1-top2 gap of the processed logits is below make_golden.MIN_MARGIN (so the fp16
engine cannot flip a near tie), and max_tokens is that length.

Needs what tools/make_smollm2_golden.py needs (the GGUF in .cache/smollm2/, torch, transformers
5, gguf). CPU only, a minute, deterministic:

    python3 tools/make_smollm2_shaping_golden.py
"""

import json
import os
import sys

import torch
from transformers import LogitsProcessor, LogitsProcessorList

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as g  # noqa: E402
import make_smollm2_golden as smol  # noqa: E402

MAX_NEW_TOKENS = 24
MIN_TOKENS_KEPT = 8


class VllmPenalties(LogitsProcessor):
    """vLLM's frequency and presence penalties over the generated tokens."""

    def __init__(self, prompt_len, frequency, presence):
        self.prompt_len, self.frequency, self.presence = prompt_len, frequency, presence

    def __call__(self, input_ids, scores):
        generated = input_ids[:, self.prompt_len:]
        counts = torch.zeros_like(scores)
        if generated.shape[1] > 0:
            counts.scatter_add_(1, generated, torch.ones_like(generated, dtype=scores.dtype))
        scores = scores - self.frequency * counts
        return scores - self.presence * (counts > 0).to(scores.dtype)


class Bias(LogitsProcessor):
    def __init__(self, bias):
        self.bias = bias

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        for token, value in self.bias.items():
            scores[:, token] += value
        return scores


def chat_prompt(tok, text):
    return tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                   add_generation_prompt=True)


@torch.no_grad()
def run_case(model, tok, case):
    prompt = case["prompt_ids"]
    processors = LogitsProcessorList()
    if case["frequency_penalty"] or case["presence_penalty"]:
        processors.append(VllmPenalties(len(prompt), case["frequency_penalty"],
                                        case["presence_penalty"]))
    if case["logit_bias"]:
        processors.append(Bias({int(k): v for k, v in case["logit_bias"].items()}))
    out = model.generate(
        torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
        max_new_tokens=MAX_NEW_TOKENS, do_sample=False, num_beams=1,
        repetition_penalty=case["repetition_penalty"], min_new_tokens=case["min_tokens"],
        eos_token_id=None if case["ignore_eos"] else tok.eos_token_id,
        pad_token_id=tok.eos_token_id, logits_processor=processors,
        return_dict_in_generate=True, output_scores=True)
    new = out.sequences[0, len(prompt):].tolist()
    kept, worst = [], float("inf")
    for token, scores in zip(new, out.scores):
        margin = g.margin_of(scores[0])
        if margin < g.MIN_MARGIN:
            break
        kept.append(token)
        worst = min(worst, margin)
    return kept, worst


def main():
    tok, model = smol.load(smol.Q4_1_NAME)
    enc = lambda text: smol.encode(tok, text)  # noqa: E731
    green, blue = enc(" green")[0], enc(" blue")[0]
    neutral = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0,
               "logit_bias": {}, "min_tokens": 0, "ignore_eos": True}
    # Each case: its shaping and candidate prompts, the first whose shaped continuation keeps
    # MIN_TOKENS_KEPT tokens clear of near ties taken (the others are listed when none does).
    chat = lambda text: enc(chat_prompt(tok, text))  # noqa: E731
    specs = [
        (dict(name="repetition_penalty 1.3", repetition_penalty=1.3),
         [enc("The cat sat on the mat. The cat sat on the mat. The cat"),
          enc("One, two, three, one, two, three, one,"),
          chat("Repeat the word hello five times."),
          enc("def add(a, b):\n    return a + b\n\ndef")]),
        (dict(name="frequency 0.8 and presence 0.6", frequency_penalty=0.8, presence_penalty=0.6),
         [enc("Here is a list of fruits: apple, banana, apple, banana,"),
          chat("Name five animals."),
          enc("def add(a, b):\n    return a + b\n\ndef")]),
        (dict(name="presence -1.0 (repeats rewarded)", presence_penalty=-1.0),
         [chat("Write a short poem about the sea."), enc("Write a poem about the sea:\n"),
          chat("Name five animals.")]),
        (dict(name="repetition 1.2, frequency 0.5, presence 0.3", repetition_penalty=1.2,
              frequency_penalty=0.5, presence_penalty=0.3, ignore_eos=False),
         [chat("Describe a forest in two sentences."), chat("What is a hash table?"),
          chat("Name five animals.")]),
        (dict(name="logit_bias: ' green' +8, ' blue' -100",
              logit_bias={str(green): 8.0, str(blue): -100.0}),
         [enc("The sky on a clear day is"), chat("What colour is the sky?"),
          enc("My favourite colour is")]),
        (dict(name="min_tokens 12 before EOS", min_tokens=12, ignore_eos=False),
         [chat("Answer with one word: is the sky blue?"), chat("Say yes."), chat("Hi!")]),
    ]
    cases = []
    for shaping, prompts in specs:
        tried = []
        for prompt in prompts:
            case = dict(neutral, **shaping, prompt_ids=prompt)
            # The reference without shaping, to show the case changes the continuation.
            base, _ = run_case(model, tok, dict(neutral, prompt_ids=prompt,
                                                ignore_eos=case["ignore_eos"]))
            out, margin = run_case(model, tok, case)
            tried.append(f"  {tok.decode(prompt)!r}: {len(out)} tokens {tok.decode(out)!r}")
            n = min(len(out), len(base))
            if len(out) < MIN_TOKENS_KEPT or (out[:n] == base[:n] and not case["min_tokens"]):
                continue
            case["max_tokens"] = len(out)
            case["output_ids"] = out
            case["min_margin"] = round(margin, 6)
            print(f"{case['name']}: {len(out)} tokens, margin {margin:.3f}\n"
                  f"  plain:  {tok.decode(base)!r}\n  shaped: {tok.decode(out)!r}")
            cases.append(case)
            break
        else:
            raise SystemExit(f"{shaping['name']}: no candidate prompt\n" + "\n".join(tried))
    if any(c["min_tokens"] for c in cases):
        c = next(c for c in cases if c["min_tokens"])
        assert tok.eos_token_id not in c["output_ids"][:c["min_tokens"]]
    path = os.path.join(smol.OUT_DIR, "shaping.json")
    with open(path, "w") as f:
        json.dump({"model": smol.Q4_1_NAME, "transformers": smol.pkg_version("transformers"),
                   "eos_token_id": tok.eos_token_id, "cases": cases}, f, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
