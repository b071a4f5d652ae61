#!/usr/bin/env python3
"""Trains a small OPT-architecture language model (transformers' OPTForCausalLM) from scratch.

Input is the folder that tools/prepare_corpus.py writes (train.bin, heldout.bin,
tokenizer/vocab.json, tokenizer/merges.txt, manifest.json). The model is pre-LN OPT
(do_layer_norm_before=True, ReLU, learned positions, LM head tied to the token embedding) with
bos = eos = 2 ("</s>") and pad = 1, matching the tokenizer's ids.

Training: random windows of --seq-len tokens from the training stream (a --doc-start-frac share
of them starting at a document's "</s>", the way a prompt starts), AdamW, linear warmup then
cosine decay to --min-lr-ratio x --lr, gradient clipping, fp32 or bf16 autocast. Every
--eval-every steps the loss on a fixed set of held-out windows is logged; every --save-every
steps (and at the end) a checkpoint is written atomically to OUT/ckpt/last.pt, from which
--resume continues bit-for-bit the same data order and schedule. tools/export_small_opt.py turns
any checkpoint into a Hugging Face directory (fp16 safetensors).

CPU (a few million parameters, about an hour or two on two cores):

    nice -n 19 python3 tools/train_small_opt.py --data out/train --out out/train/run \\
        --hidden 256 --layers 4 --heads 4 --ffn 1024 --steps 1500 --batch-size 4
    nice -n 19 python3 tools/train_small_opt.py --data out/train --out out/train/run --resume

GPU (the same script, a bigger model):

    python3 tools/train_small_opt.py --device cuda --dtype bf16 --data out/train \\
        --out out/train/run-768 --hidden 768 --layers 12 --heads 12 --ffn 3072 \\
        --batch-size 16 --grad-accum 4 --steps 20000 --lr 6e-4

The log (OUT/train.log, also on stdout) has one line per --log-every steps with the training
loss, learning rate, tokens seen and throughput, and one "eval" line per evaluation.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import time

import numpy as np
import torch


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="out/train", help="folder written by prepare_corpus.py")
    ap.add_argument("--out", default="out/train/run", help="checkpoints and log go here")
    ap.add_argument("--init-from", default=None,
                    help="a Hugging Face OPT directory to start from (its sizes replace --hidden "
                         "and the others): continued training of a shipped model")
    ap.add_argument("--resume", action="store_true",
                    help="continue from OUT/ckpt/last.pt (model sizes and schedule come from it)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                    help="autocast dtype for the forward pass (weights stay fp32)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    # Model.
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--positions", type=int, default=1024, help="max_position_embeddings")
    # Data and schedule.
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=4, help="sequences per micro-batch")
    ap.add_argument("--grad-accum", type=int, default=1, help="micro-batches per step")
    ap.add_argument("--doc-start-frac", type=float, default=0.25,
                    help="share of windows that start at a document's </s>")
    ap.add_argument("--copy-frac", type=float, default=0.0,
                    help="share of windows in which spans recur later in the window "
                         "(three in four of random tokens, the others the window's own text), so "
                         "the model learns to copy and retrieve over long distances")
    ap.add_argument("--repeat-frac", type=float, default=0.0,
                    help="share of windows that are a random token sequence of 8-256 tokens "
                         "repeated to the window's end: every token after its first period is a "
                         "copy, the densest signal for forming induction heads")
    ap.add_argument("--task-frac", type=float, default=0.0,
                    help="share of windows filled with pass-key and key-value documents in the "
                         "format of `offgen compare --tasks` (training-split filler, other random "
                         "numbers), one after another, each 48 to seq-len tokens long "
                         "(log-uniform)")
    ap.add_argument("--copy-spans", type=int, default=3,
                    help="at most this many recurring spans per such window (at least one)")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1234)
    # Bookkeeping.
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-seqs", type=int, default=16, help="held-out windows per evaluation")
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--keep-every", type=int, default=0,
                    help="also keep OUT/ckpt/step-N.pt every N steps (0: only last.pt)")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="stop (with a checkpoint) after this much wall time in this run; 0: no limit")
    return ap.parse_args(argv)


# Arguments that define the run; --resume takes them from the checkpoint.
RUN_KEYS = ["hidden", "layers", "heads", "ffn", "positions", "seq_len", "batch_size", "grad_accum",
            "doc_start_frac", "copy_frac", "copy_spans", "repeat_frac", "task_frac", "init_from", "steps", "lr", "min_lr_ratio", "warmup", "weight_decay", "beta2",
            "clip", "seed"]


def load_tokens(path: pathlib.Path, dtype: str) -> np.ndarray:
    return np.memmap(path, dtype=np.dtype(dtype), mode="r")


def build_model(run: dict, vocab_size: int):
    from transformers import OPTConfig, OPTForCausalLM
    config = OPTConfig(
        vocab_size=vocab_size,
        hidden_size=run["hidden"],
        num_hidden_layers=run["layers"],
        ffn_dim=run["ffn"],
        num_attention_heads=run["heads"],
        max_position_embeddings=run["positions"],
        do_layer_norm_before=True,
        word_embed_proj_dim=run["hidden"],
        activation_function="relu",
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        layerdrop=0.0,
        init_std=0.02,
        enable_bias=True,
        layer_norm_elementwise_affine=True,
        tie_word_embeddings=True,
        bos_token_id=2,
        eos_token_id=2,
        pad_token_id=1,
        use_cache=True,
    )
    try:
        model = OPTForCausalLM._from_config(config, attn_implementation="sdpa")
    except (TypeError, ValueError, ImportError):
        model = OPTForCausalLM(config)
    return model


def lr_at(step: int, run: dict) -> float:
    """Linear warmup to lr, then cosine to lr * min_lr_ratio at the last step."""
    lr, warm, total = run["lr"], run["warmup"], run["steps"]
    if step < warm:
        return lr * (step + 1) / warm
    progress = min(1.0, (step - warm) / max(1, total - warm))
    floor = lr * run["min_lr_ratio"]
    return floor + 0.5 * (lr - floor) * (1.0 + math.cos(math.pi * progress))


def frequent_tokens(tokens: np.ndarray, count: int = 1024) -> np.ndarray:
    """The `count` most frequent non-special ids of the training stream: random spans are drawn
    from them, whose embeddings training has shaped, rather than from rare ids."""
    counts = np.bincount(np.asarray(tokens[:5_000_000]), minlength=4)
    counts[:4] = 0
    return np.argsort(-counts, kind="stable")[:count]


def plant_repeats(window: np.ndarray, rng: np.random.Generator, vocab: np.ndarray,
                  max_spans: int = 3, min_distance: int = 8) -> list[tuple[int, int]]:
    """Makes 1..max_spans spans of `window` recur later in it, in place: a span of 4-64 tokens
    (random non-special ids, or the window's own text) is written at a source position and again
    at a later one, the gap uniform over what the window allows. Returns (start, length) of each
    second copy: those tokens can only be predicted by looking back at the first."""
    t = len(window)
    copies = []
    for _ in range(int(rng.integers(1, max_spans + 1))):
        length = int(rng.integers(4, 65))
        src = int(rng.integers(0, t - 2 * length - min_distance))
        dst = int(rng.integers(src + length + min_distance, t - length + 1))
        if rng.random() < 0.75:
            window[src:src + length] = rng.choice(vocab, size=length)
        window[dst:dst + length] = window[src:src + length]
        copies.append((dst, length))
    return copies


class TaskDocuments:
    """Pass-key and key-value documents in the text format of offgen's long-context tasks
    (bench/long_context_tasks.h), with filler from the training stream: a pass key hidden at a
    random depth and asked for at the end, or a list of " 70412 55130." pairs ending with one
    key and its value. The answer follows the question, so the loss teaches retrieving it."""

    def __init__(self, data: pathlib.Path):
        from tokenizers import ByteLevelBPETokenizer
        self.tok = ByteLevelBPETokenizer(str(data / "tokenizer" / "vocab.json"),
                                         str(data / "tokenizer" / "merges.txt"),
                                         add_prefix_space=False)
        self.question = self.encode(" What is the pass key? The pass key is")
        self.period = self.encode(".")

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text).ids

    def passkey(self, rng, length: int, filler: np.ndarray) -> list[int]:
        key = int(rng.integers(10000, 100000))
        needle = self.encode(f" The pass key is {key}. Remember it. {key} is the pass key.")
        answer = self.encode(f" {key}") + self.period
        room = max(0, length - len(needle) - len(self.question) - len(answer))
        at = int(rng.integers(0, room + 1))
        return (list(filler[:at]) + needle + list(filler[at:room]) + self.question + answer)

    def kv_recall(self, rng, length: int, filler: np.ndarray) -> list[int]:
        pairs, used = [], 0
        while True:
            p = (self.encode(f" {int(rng.integers(10000, 100000))}"),
                 self.encode(f" {int(rng.integers(10000, 100000))}"))
            size = len(p[0]) + len(p[1]) + len(self.period)
            if used + size > length - 12 and pairs:
                break
            pairs.append(p)
            used += size
        asked = pairs[int(rng.integers(0, len(pairs)))]
        out = list(filler[:max(0, length - used - 12)])
        for k, v in pairs:
            out += k + v + self.period
        return out + asked[0] + asked[1] + self.period

    def window(self, rng, t: int, filler: np.ndarray) -> np.ndarray:
        out: list[int] = []
        while len(out) < t:
            # log-uniform: many short documents (more answers per step), some as long as t
            length = int(np.exp(rng.uniform(np.log(48), np.log(t))))
            make = self.passkey if rng.random() < 0.6 else self.kv_recall
            start = int(rng.integers(0, len(filler) - t))
            out += make(rng, length, np.asarray(filler[start:start + t], dtype=np.int64))
        return np.asarray(out[:t], dtype=np.int64)


def batch_for_step(step: int, micro: int, tokens: np.ndarray, doc_starts: np.ndarray,
                   run: dict, vocab: np.ndarray | None = None,
                   tasks: TaskDocuments | None = None) -> torch.Tensor:
    """The same windows for the same (seed, step, micro), so a resumed run sees the same data."""
    rng = np.random.default_rng([run["seed"], step, micro])
    n, t = run["batch_size"], run["seq_len"]
    limit = len(tokens) - t
    starts = rng.integers(0, limit, size=n)
    from_doc = rng.random(n) < run["doc_start_frac"]
    if from_doc.any():
        usable = doc_starts[doc_starts < limit]
        starts[from_doc] = usable[rng.integers(0, len(usable), size=int(from_doc.sum()))]
    windows = np.stack([tokens[s:s + t].astype(np.int64) for s in starts])
    planted = rng.random(n) < run.get("copy_frac", 0.0)
    for i in np.flatnonzero(planted):
        plant_repeats(windows[i], rng, vocab, run.get("copy_spans", 3))
    repeated = rng.random(n) < run.get("repeat_frac", 0.0)
    for i in np.flatnonzero(repeated):
        period = rng.choice(vocab, size=int(rng.integers(8, 257)))
        windows[i] = np.resize(period, t)
    task_windows = rng.random(n) < run.get("task_frac", 0.0)
    for i in np.flatnonzero(task_windows):
        windows[i] = tasks.window(rng, t, tokens)
    return torch.from_numpy(windows)


def copy_eval_windows(windows: torch.Tensor, vocab: np.ndarray):
    """Held-out windows with one span of 16 random frequent tokens recurring ~seq_len/2 later: the
    loss on its second copy (first token left out) measures long-distance copying."""
    rng = np.random.default_rng(4321)
    out, targets = windows.clone().numpy(), []
    t = out.shape[1]
    for w in out:
        src = int(rng.integers(8, t // 4))
        dst = src + t // 2
        w[src:src + 16] = rng.choice(vocab, size=16)
        w[dst:dst + 16] = w[src:src + 16]
        targets.append((dst + 1, dst + 16))
    return torch.from_numpy(out), targets


@torch.no_grad()
def evaluate_copy(model, windows: torch.Tensor, targets, device, batch_size: int) -> float:
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        x = windows[i:i + batch_size].to(device)
        logp = torch.log_softmax(model(input_ids=x).logits.float(), dim=-1)
        for j, (a, b) in enumerate(targets[i:i + batch_size]):
            # the token at position p is predicted by the logits at p - 1
            pos = torch.arange(a, b)
            total -= logp[j, pos - 1, x[j, pos]].sum().item()
            count += b - a
    model.train()
    return total / count


@torch.no_grad()
def evaluate_passkey(model, tasks: "TaskDocuments", heldout: np.ndarray, device,
                     length: int = 1000, count: int = 16) -> float:
    """Share of held-out pass-key documents (filler from the held-out stream, depth spread from
    start to end) whose answer the model predicts token for token (greedy, teacher-forced)."""
    model.eval()
    rng = np.random.default_rng(99)
    right = 0
    for i in range(count):
        start = int(rng.integers(0, len(heldout) - length))
        doc = tasks.passkey(rng, length, np.asarray(heldout[start:start + length], dtype=np.int64))
        answer = len(tasks.period) + len(tasks.encode(" 12345"))
        x = torch.tensor([doc], device=device)
        pred = model(input_ids=x).logits[0].argmax(-1)
        right += int(all(pred[j - 1].item() == doc[j]
                         for j in range(len(doc) - answer, len(doc) - len(tasks.period))))
    model.train()
    return right / count


def eval_windows(tokens: np.ndarray, seq_len: int, count: int) -> torch.Tensor:
    """`count` non-overlapping held-out windows, evenly spread over the held-out stream."""
    total = len(tokens) // seq_len
    picks = np.linspace(0, total - 1, num=min(count, total)).astype(np.int64)
    return torch.from_numpy(
        np.stack([tokens[i * seq_len:(i + 1) * seq_len].astype(np.int64) for i in picks]))


@torch.no_grad()
def evaluate(model, windows: torch.Tensor, device, autocast_dtype, batch_size: int) -> float:
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        x = windows[i:i + batch_size].to(device)
        with torch.autocast(device_type=device.type, dtype=autocast_dtype,
                            enabled=autocast_dtype is not None):
            logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].float().reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1),
            reduction="sum")
        total += loss.item()
        count += x[:, 1:].numel()
    model.train()
    return total / count


def save_checkpoint(path: pathlib.Path, model, optimizer, state: dict, run: dict):
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "config": model.config.to_dict(), "run": run, "state": state}, tmp)
    os.replace(tmp, path)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    data = pathlib.Path(args.data)
    out = pathlib.Path(args.out)
    (out / "ckpt").mkdir(parents=True, exist_ok=True)
    log_file = open(out / "train.log", "a", buffering=1)

    def log(msg: str):
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}"
        print(line, flush=True)
        log_file.write(line + "\n")

    manifest = json.loads((data / "manifest.json").read_text())
    vocab_size = manifest["vocab_size"]
    train_tokens = load_tokens(data / "train.bin", manifest["dtype"])
    heldout_tokens = load_tokens(data / "heldout.bin", manifest["dtype"])
    doc_starts = np.flatnonzero(np.asarray(train_tokens) == manifest["bos_id"])
    vocab = frequent_tokens(train_tokens)
    tasks = TaskDocuments(data) if args.task_frac > 0 or args.resume else None

    ckpt_path = out / "ckpt" / "last.pt"
    ckpt = None
    if args.resume:
        if not ckpt_path.exists():
            log(f"--resume: no checkpoint at {ckpt_path}")
            return 1
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        run = ckpt["run"]
        # A resumed run may be extended: --steps larger than the checkpoint's moves the end of
        # the cosine (the learning rate jumps up a little); otherwise the checkpoint's schedule.
        if any(a == "--steps" or a.startswith("--steps=") for a in (argv if argv is not None else sys.argv[1:])):
            run["steps"] = args.steps
    else:
        run = {k: getattr(args, k) for k in RUN_KEYS}
        run["vocab_size"] = vocab_size
        if args.init_from and args.init_from.endswith(".pt"):
            base_run = torch.load(args.init_from, map_location="cpu", weights_only=False)["run"]
            run.update({k: base_run[k] for k in ("hidden", "layers", "heads", "ffn", "positions")})
        elif args.init_from:
            from transformers import OPTConfig
            base = OPTConfig.from_pretrained(args.init_from)
            run.update(hidden=base.hidden_size, layers=base.num_hidden_layers,
                       heads=base.num_attention_heads, ffn=base.ffn_dim,
                       positions=base.max_position_embeddings)
            if base.vocab_size != vocab_size:
                raise SystemExit(f"--init-from {args.init_from} has a vocabulary of "
                                 f"{base.vocab_size}, the corpus {vocab_size}: tokenize the "
                                 f"corpus with its tokenizer (prepare_corpus.py --tokenizer)")
    if run["seq_len"] > run["positions"]:
        raise SystemExit(f"--seq-len {run['seq_len']} exceeds --positions {run['positions']}")

    device = torch.device(args.device)
    autocast_dtype = torch.bfloat16 if args.dtype == "bf16" else None
    torch.manual_seed(run["seed"])
    model = build_model(run, vocab_size)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed_positions" not in name else no_decay).append(p)
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
    elif (run.get("init_from") or "").endswith(".pt"):
        model.load_state_dict(torch.load(run["init_from"], map_location="cpu",
                                         weights_only=False)["model"])
    elif run.get("init_from"):
        from transformers import OPTForCausalLM
        base = OPTForCausalLM.from_pretrained(run["init_from"], torch_dtype=torch.float32)
        model.load_state_dict(base.state_dict())
        del base
    model.to(device)
    model.train()
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": run["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=run["lr"], betas=(0.9, run["beta2"]), eps=1e-8,
        fused=device.type == "cuda")
    state = {"step": 0, "tokens": 0, "train_seconds": 0.0, "last_eval": None}
    if ckpt is not None:
        optimizer.load_state_dict(ckpt["optimizer"])
        state = ckpt["state"]
        del ckpt

    n_params = sum(p.numel() for p in model.parameters())
    n_embed = model.model.decoder.embed_tokens.weight.numel()
    n_pos = model.model.decoder.embed_positions.weight.numel()
    windows = eval_windows(heldout_tokens, run["seq_len"], args.eval_seqs)
    tokens_per_step = run["batch_size"] * run["grad_accum"] * run["seq_len"]
    log(f"{'resume' if args.resume else 'start'}: step {state['step']}/{run['steps']}, "
        f"{n_params:,} parameters ({n_params - n_embed - n_pos:,} without embeddings), "
        f"config hidden={run['hidden']} layers={run['layers']} heads={run['heads']} "
        f"ffn={run['ffn']} positions={run['positions']} vocab={vocab_size}, "
        f"{tokens_per_step:,} tokens/step, train {len(train_tokens):,} tokens, "
        f"held-out {len(heldout_tokens):,} tokens ({len(windows)} eval windows), "
        f"device {device}, dtype {args.dtype}, threads {torch.get_num_threads()}")
    log("run " + json.dumps(run, sort_keys=True))

    copy_windows, copy_targets = copy_eval_windows(windows, vocab)

    def do_eval():
        t = time.time()
        loss = evaluate(model, windows, device, autocast_dtype, run["batch_size"])
        copy_loss = evaluate_copy(model, copy_windows, copy_targets, device, run["batch_size"])
        state["last_eval"] = {"step": state["step"], "loss": loss, "copy_loss": copy_loss}
        copy_text = f"{copy_loss:.4f}"
        if tasks is not None:
            state["last_eval"]["passkey"] = evaluate_passkey(model, tasks, heldout_tokens, device)
            copy_text += f" passkey {state['last_eval']['passkey']:.2f}"
        log(f"eval step {state['step']} heldout_loss {loss:.4f} ppl {math.exp(loss):.2f} "
            f"copy_loss {copy_text} (uniform {math.log(len(vocab)):.2f}) "
            f"({time.time() - t:.1f} s)")

    def save():
        save_checkpoint(ckpt_path, model, optimizer, state, run)
        if args.keep_every and state["step"] % args.keep_every == 0:
            save_checkpoint(out / "ckpt" / f"step-{state['step']}.pt", model, optimizer, state, run)

    if state["step"] == 0:
        do_eval()
    run_start = time.time()
    window_start, window_tokens, window_loss, window_n = time.time(), 0, 0.0, 0
    while state["step"] < run["steps"]:
        step = state["step"]
        t0 = time.time()
        lr = lr_at(step, run)
        for group in optimizer.param_groups:
            group["lr"] = lr
        step_loss = 0.0
        for micro in range(run["grad_accum"]):
            x = batch_for_step(step, micro, train_tokens, doc_starts, run, vocab,
                               tasks).to(device)
            with torch.autocast(device_type=device.type, dtype=autocast_dtype,
                                enabled=autocast_dtype is not None):
                out_ = model(input_ids=x, labels=x)
            loss = out_.loss / run["grad_accum"]
            loss.backward()
            step_loss += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), run["clip"]).item()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        state["step"] += 1
        state["tokens"] += tokens_per_step
        state["train_seconds"] += time.time() - t0
        window_tokens += tokens_per_step
        window_loss += step_loss
        window_n += 1

        if state["step"] % args.log_every == 0 or state["step"] == run["steps"]:
            dt = time.time() - window_start
            log(f"step {state['step']}/{run['steps']} loss {window_loss / window_n:.4f} "
                f"lr {lr:.2e} gnorm {grad_norm:.2f} tokens {state['tokens']:,} "
                f"{dt / window_n:.2f} s/step {window_tokens / dt:.0f} tok/s "
                f"train_time {state['train_seconds'] / 60:.1f} min")
            window_start, window_tokens, window_loss, window_n = time.time(), 0, 0.0, 0
        if state["step"] % args.eval_every == 0 or state["step"] == run["steps"]:
            do_eval()
        if state["step"] % args.save_every == 0 or state["step"] == run["steps"]:
            save()
        if args.max_minutes and time.time() - run_start > args.max_minutes * 60:
            save()
            log(f"stopping after --max-minutes {args.max_minutes} at step {state['step']}")
            return 0
    log(f"done: {state['step']} steps, {state['tokens']:,} tokens, "
        f"{state['train_seconds'] / 60:.1f} min of training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
