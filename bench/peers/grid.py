"""What the peer runners share: the grid's arguments, and the loop that times each shape (a
warm-up first, then one generation of 1 new token for the prefill and one of GEN_LEN for the
total) and prints one JSON object per shape."""
import json


def add_grid_arguments(parser):
    parser.add_argument("--batch", default="1,8,32")
    parser.add_argument("--prompt-len", default="128,512")
    parser.add_argument("--gen-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="0: the engine's default")
    parser.add_argument("--seed", type=int, default=0)


def time_grid(args, make_prompts, timed_generate):
    """make_prompts(batch, length) -> the engine's prompts; timed_generate(prompts, new_tokens)
    -> seconds, after checking that exactly new_tokens came out per sequence."""
    timed_generate(make_prompts(1, 16), 2)  # warm-up: kernels are built and memory faulted in
    for prompt_len in [int(p) for p in args.prompt_len.split(",")]:
        for batch in [int(b) for b in args.batch.split(",")]:
            prompts = make_prompts(batch, prompt_len)
            prefill = timed_generate(prompts, 1)
            total = timed_generate(prompts, args.gen_len)
            print(json.dumps({"batch": batch, "prompt_len": prompt_len, "gen_len": args.gen_len,
                              "prefill_seconds": prefill, "total_seconds": total}), flush=True)
