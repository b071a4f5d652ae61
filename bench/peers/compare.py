#!/usr/bin/env python3
"""Runs offgen against the CPU engines of its field on the same checkpoints, interleaved, and
prints each shape's median times and offgen's ratios. `scripts/compare-peers` sets everything up
and calls this; run it directly to change the grid:

    compare.py --peers peers --offgen build/release/bin/offgen --repeats 3

Two grids, each over batch x prompt length with GEN_LEN new tokens per sequence:
  * OPT: one random OPT-125m checkpoint (fp16 safetensors) read by offgen, Hugging Face
    transformers and CTranslate2 (converted from it);
  * LLaMA: SmolLM2-135M-Instruct, read by offgen and llama.cpp (`llama-batched-bench`, separate
    prompts per sequence) from the same F16 GGUF, and by llama.cpp as Q8_0.
Every repetition runs every engine once, in a fixed order, each as its own process timing a whole
grid; the median of the repetitions is reported. Each offgen mode is set against the peers of
the matching precision: fp16-exact against fp32 (and llama.cpp's F16), bf16 prefill against
bf16, int8 weights against int8 (and Q8_0), alone and with the prefill's attention in bf16
(--prefill-math bf16).

Total throughput is generated tokens / (prefill + decode) seconds, as `offgen bench` reports it.
The "prefill" ratio is peer prefill seconds / offgen prefill seconds, so above 1 offgen is faster.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def grid_rows(lines):
    """(batch, prompt_len) -> (prefill_seconds, total_seconds) from runner JSON lines."""
    rows = {}
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        rows[(r["batch"], r["prompt_len"])] = (r["prefill_seconds"], r["total_seconds"])
    return rows


def run(cmd, env=None):
    print("  $ " + " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{cmd[0]} failed with exit code {done.returncode}")
    return done.stdout


def offgen_grid(args, model, flags):
    out = os.path.join(args.peers, "offgen-rows.json")
    run([args.offgen, "bench", "--model", model, "--device", "cpu",
         "--batch", args.batch, "--prompt-len", args.prompt_len, "--gen-len", str(args.gen_len),
         "--json", out] + flags)
    with open(out) as f:
        rows = json.load(f)
    result = {}
    for r in rows:
        if r.get("status") != "measured":
            raise SystemExit(f"offgen bench did not measure batch {r['batch']} x prompt "
                             f"{r['prompt_len']}: {r.get('error')}")
        result[(r["batch"], r["prompt_len"])] = (r["prefill_seconds"], r["total_seconds"])
    return result


def python_grid(args, script, flags):
    return grid_rows(run([args.python, os.path.join(HERE, script), "--batch", args.batch,
                          "--prompt-len", args.prompt_len, "--gen-len", str(args.gen_len),
                          "--threads", str(args.threads)] + flags).splitlines())


def llama_grid(args, gguf):
    prompts = [int(p) for p in args.prompt_len.split(",")]
    batches = [int(b) for b in args.batch.split(",")]
    context = max(batches) * (max(prompts) + args.gen_len)
    # The prompt pass yields each sequence's first token, so GEN_LEN tokens take GEN_LEN - 1
    # decode passes, as in offgen bench and transformers' generate().
    out = run([args.llama_bench, "-m", gguf, "-c", str(context), "-b", "2048", "-ub", "512",
               "-npp", args.prompt_len, "-ntg", str(args.gen_len - 1), "-npl", args.batch,
               "-t", str(args.threads), "--output-format", "jsonl"])
    rows = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            rows[(r["pl"], r["pp"])] = (r["t_pp"], r["t"])
    return rows


def engines(args):
    """(grid, name, precision, callable) in the order each repetition runs them."""
    opt, ct2 = args.opt_model, args.ct2_model
    found = [
        ("opt", "offgen fp16-exact", "fp32", lambda: offgen_grid(args, opt, [])),
        ("opt", "offgen bf16", "bf16", lambda: offgen_grid(args, opt, ["--prefill-math", "bf16"])),
        ("opt", "offgen int8", "int8", lambda: offgen_grid(args, opt, ["--int8-weights"])),
        ("opt", "offgen int8 bf16-attention", "int8",
         lambda: offgen_grid(args, opt, ["--int8-weights", "--prefill-math", "bf16"])),
        ("opt", "transformers fp32", "fp32",
         lambda: python_grid(args, "run_transformers.py", ["--model", opt, "--dtype", "fp32"])),
        ("opt", "transformers bf16", "bf16",
         lambda: python_grid(args, "run_transformers.py", ["--model", opt, "--dtype", "bf16"])),
        ("opt", "ctranslate2 fp32", "fp32",
         lambda: python_grid(args, "run_ctranslate2.py",
                             ["--model", ct2, "--compute-type", "float32"])),
        ("opt", "ctranslate2 int8", "int8",
         lambda: python_grid(args, "run_ctranslate2.py",
                             ["--model", ct2, "--compute-type", "int8"])),
    ]
    if args.llama_bench:
        f16, q8 = args.gguf_f16, args.gguf_q8
        found += [
            ("llama", "offgen fp16-exact", "fp32", lambda: offgen_grid(args, f16, [])),
            ("llama", "offgen bf16", "bf16",
             lambda: offgen_grid(args, f16, ["--prefill-math", "bf16"])),
            ("llama", "offgen int8", "int8", lambda: offgen_grid(args, f16, ["--int8-weights"])),
            ("llama", "offgen int8 bf16-attention", "int8",
             lambda: offgen_grid(args, f16, ["--int8-weights", "--prefill-math", "bf16"])),
            ("llama", "llama.cpp F16", "fp32", lambda: llama_grid(args, f16)),
            ("llama", "llama.cpp Q8_0", "int8", lambda: llama_grid(args, q8)),
        ]
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", default="peers", help="the ignored folder compare-peers set up")
    parser.add_argument("--offgen", default="build/release/bin/offgen")
    parser.add_argument("--python", default=None, help="the peers' Python (default PEERS/venv)")
    parser.add_argument("--opt-model", default=None)
    parser.add_argument("--ct2-model", default=None)
    parser.add_argument("--llama-bench", default=None, help="llama-batched-bench ('' skips)")
    parser.add_argument("--gguf-f16", default=None)
    parser.add_argument("--gguf-q8", default=None)
    parser.add_argument("--batch", default="1,8,32")
    parser.add_argument("--prompt-len", default="128,512")
    parser.add_argument("--gen-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--grids", default="opt,llama", help="which grids to run: opt, llama")
    parser.add_argument("--json", default=None, help="also write every run and median here")
    parser.add_argument("--engines", default=None,
                        help="only these engines, by name, comma-separated (e.g. 'offgen bf16,"
                             "transformers bf16'; default: every one)")
    args = parser.parse_args()
    models = os.path.join(args.peers, "models")
    args.python = args.python or os.path.join(args.peers, "venv", "bin", "python")
    args.opt_model = args.opt_model or os.path.join(models, "opt-125m-random")
    args.ct2_model = args.ct2_model or os.path.join(models, "opt-125m-random-ct2")
    if args.llama_bench is None:
        args.llama_bench = os.path.join(args.peers, "llama.cpp-build", "bin", "llama-batched-bench")
    args.gguf_f16 = args.gguf_f16 or os.path.join(models, "smollm2-135m-f16.gguf")
    args.gguf_q8 = args.gguf_q8 or os.path.join(models, "smollm2-135m-q8_0.gguf")

    wanted = set(args.grids.split(","))
    if not wanted or not wanted <= {"opt", "llama"}:
        raise SystemExit(f"--grids takes opt and/or llama, not {args.grids!r}")
    order = [e for e in engines(args) if e[0] in wanted]
    if args.engines:
        chosen = [n.strip() for n in args.engines.split(",")]
        unknown = [n for n in chosen if n not in {e[1] for e in order}]
        if unknown:
            raise SystemExit(f"--engines: no engine named {', '.join(map(repr, unknown))} in "
                             f"the grids {args.grids}; there are "
                             f"{', '.join(sorted({e[1] for e in order}))}")
        order = [e for e in order if e[1] in chosen]
    runs = {(grid, name): [] for grid, name, _, _ in order}
    for rep in range(args.repeats):
        for grid, name, _, measure in order:
            print(f"[{rep + 1}/{args.repeats}] {grid}: {name}", file=sys.stderr, flush=True)
            runs[(grid, name)].append(measure())

    medians = {}
    for key, reps in runs.items():
        medians[key] = {shape: (statistics.median(r[shape][0] for r in reps),
                                statistics.median(r[shape][1] for r in reps))
                        for shape in reps[0]}
    report(order, medians, args.gen_len)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"grid": g, "engine": n, "batch": b, "prompt_len": p,
                        "gen_len": args.gen_len,
                        "prefill_seconds": [r[(b, p)][0] for r in runs[(g, n)]],
                        "total_seconds": [r[(b, p)][1] for r in runs[(g, n)]],
                        "median_prefill_seconds": medians[(g, n)][(b, p)][0],
                        "median_total_seconds": medians[(g, n)][(b, p)][1]}
                       for g, n, _, _ in order for (b, p) in sorted(medians[(g, n)])],
                      f, indent=1)


def report(order, medians, gen_len):
    """One table per grid: every engine's total tok/s and prefill seconds per shape, then
    offgen's ratio against the best peer of each precision."""
    for grid in sorted({g for g, _, _, _ in order}, reverse=True):
        names = [(n, p) for g, n, p, _ in order if g == grid]
        shapes = sorted(medians[(grid, names[0][0])], key=lambda s: (s[1], s[0]))
        print(f"\n## {grid}: total tok/s (prefill s), medians; gen {gen_len}\n")
        print("| engine | " + " | ".join(f"{b} x {p}" for b, p in shapes) + " |")
        print("|---|" + "---|" * len(shapes))
        for name, _ in names:
            cells = []
            for b, p in shapes:
                prefill, total = medians[(grid, name)][(b, p)]
                cells.append(f"{b * gen_len / total:.1f} ({prefill:.2f})")
            print(f"| {name} | " + " | ".join(cells) + " |")
        print(f"\n| offgen / best peer of its precision | " +
              " | ".join(f"{b} x {p}" for b, p in shapes) + " |")
        print("|---|" + "---|" * len(shapes))
        for name, precision in names:
            if not name.startswith("offgen"):
                continue
            peers = [n for n, p in names if p == precision and not n.startswith("offgen")]
            if not peers:
                continue
            cells = []
            for shape in shapes:
                ours = medians[(grid, name)][shape]
                best = min(peers, key=lambda n: medians[(grid, n)][shape][1])
                theirs = medians[(grid, best)][shape]
                cells.append(f"total {theirs[1] / ours[1]:.2f}x, prefill "
                             f"{theirs[0] / ours[0]:.2f}x ({best.split()[0]})")
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
