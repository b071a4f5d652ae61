#!/usr/bin/env python3
"""Times CTranslate2 on the CPU over a grid of batch x prompt length, the way `offgen bench` times
itself: separate random prompts per sequence, greedy, exactly GEN_LEN new tokens, prefill timed
as a generation of one new token. Prints one JSON object per shape on stdout.

    run_ctranslate2.py --model CT2_DIR --compute-type int8 --batch 1,8,32 --prompt-len 128,512
"""
import argparse
import json
import os
import random
import time

import ctranslate2

from grid import add_grid_arguments, time_grid


def vocabulary(model_dir):
    path = os.path.join(model_dir, "vocabulary.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    with open(os.path.join(model_dir, "vocabulary.txt")) as f:
        return [line.rstrip("\n") for line in f]


def timed_generate(generator, prompts, new_tokens):
    start = time.perf_counter()
    results = generator.generate_batch(prompts, max_length=new_tokens, min_length=new_tokens,
                                       sampling_topk=1, beam_size=1,
                                       include_prompt_in_result=False)
    seconds = time.perf_counter() - start
    for r in results:
        if len(r.sequences_ids[0]) != new_tokens:
            raise SystemExit(f"CTranslate2 generated {len(r.sequences_ids[0])} tokens, "
                             f"not {new_tokens}")
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--compute-type", choices=["float32", "int8"], required=True)
    add_grid_arguments(parser)
    args = parser.parse_args()
    generator = ctranslate2.Generator(args.model, device="cpu", compute_type=args.compute_type,
                                      intra_threads=args.threads)
    tokens = vocabulary(args.model)
    rng = random.Random(args.seed)

    def prompts(batch, length):
        return [[tokens[rng.randrange(4, len(tokens))] for _ in range(length)]
                for _ in range(batch)]

    time_grid(args, prompts, lambda batch_prompts, new_tokens:
              timed_generate(generator, batch_prompts, new_tokens))


if __name__ == "__main__":
    main()
