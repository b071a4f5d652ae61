#!/usr/bin/env python3
"""Times Hugging Face transformers on the CPU over a grid of batch x prompt length, the way
`offgen bench` times itself: separate random prompts per sequence (no padding), greedy, exactly
GEN_LEN new tokens (EOS suppressed), prefill timed as a generate() of one new token. Prints one
JSON object per shape on stdout.

    run_transformers.py --model DIR --dtype bf16 --batch 1,8,32 --prompt-len 128,512 --gen-len 32
"""
import argparse
import time

import torch
import transformers

from grid import add_grid_arguments, time_grid


def timed_generate(model, ids, new_tokens):
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, use_cache=True, pad_token_id=1)
    seconds = time.perf_counter() - start
    if out.shape[1] != ids.shape[1] + new_tokens:
        raise SystemExit(f"transformers generated {out.shape[1] - ids.shape[1]} tokens, "
                         f"not {new_tokens}")
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], required=True)
    add_grid_arguments(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
    model.eval()
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(args.seed)
    time_grid(args,
              lambda batch, length: torch.randint(4, vocab, (batch, length), generator=generator),
              lambda ids, new_tokens: timed_generate(model, ids, new_tokens))


if __name__ == "__main__":
    main()
