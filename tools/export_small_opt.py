#!/usr/bin/env python3
"""Exports a checkpoint of tools/train_small_opt.py as a Hugging Face OPT directory.

    python3 tools/export_small_opt.py --ckpt out/train/run/ckpt/last.pt --data out/train \\
        --out models/opt-tiny-kjv-docs

writes into --out:
  config.json, generation_config.json   OPTConfig (dtype / torch_dtype float16)
  model.safetensors                     the weights in fp16 (the LM head is tied to the token
                                        embedding, so it is not stored)
  vocab.json, merges.txt                the byte-level BPE from prepare_corpus.py
  tokenizer_config.json,                GPT2Tokenizer settings as in OPT: "</s>" (id 2) prepended
  special_tokens_map.json               as BOS, "</s>" as EOS, "<pad>" (id 1) for padding
  eval.jsonl                            held-out texts, {"text": ...} per line, each the start of a
                                        held-out document cut at a line end once it reaches
                                        --eval-min-tokens tokens (default 1100, so 1024+ always)
  README.md                             corpus, model, training and evaluation numbers

It then reloads the directory with transformers (AutoModelForCausalLM, AutoTokenizer: the fp16
weights upcast to fp32 for the CPU) and measures perplexity on the whole held-out split (every
held-out document, "</s>" + its tokens, cut into 1024-token windows) and on eval.jsonl (each text's
first 1024 tokens, "</s>" included). The README gets those numbers; --no-eval skips them.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import shutil
import sys
import time

import torch

SOURCE_TITLES = {
    "kjv": ("bible-kjv-text", "The King James Bible, one document per book (via the `bible` program "
            "of bible-kjv); public domain"),
    "linux-doc": ("linux-doc-*", "The Linux kernel's Documentation/ tree (reStructuredText and "
                  "text; translations/ and devicetree/ left out); GPL-2.0"),
    "python-doc": ("python3.*-doc", "The Python documentation's reStructuredText sources; PSF "
                   "License"),
    "jargon": ("jargon-text", "The Jargon File 4.4.7; public domain"),
    "devil": ("dict-devil", "Ambrose Bierce, The Devil's Dictionary; public domain"),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", default="out/train/run/ckpt/last.pt")
    ap.add_argument("--data", default="out/train", help="folder written by prepare_corpus.py")
    ap.add_argument("--out", default="models/opt-tiny-kjv-docs")
    ap.add_argument("--hardware", default="2-core x86 CPU",
                    help="what the README says the model was trained on")
    ap.add_argument("--eval-texts", type=int, default=24, help="texts in eval.jsonl")
    ap.add_argument("--eval-min-tokens", type=int, default=1100)
    ap.add_argument("--no-eval", action="store_true", help="skip the perplexity measurements")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=4, help="windows per forward in evaluation")
    ap.add_argument("--max-heldout-docs", type=int, default=0,
                    help="score only the first N held-out documents (a quick check; 0: all)")
    return ap.parse_args(argv)


def pick_eval_texts(heldout: list[dict], tok, count: int, min_tokens: int) -> list[dict]:
    """Round-robin over sources, documents in file order; each cut at a line end >= min_tokens."""
    by_source: dict[str, list[dict]] = {}
    for d in heldout:
        by_source.setdefault(d["source"], []).append(d)
    cut_docs: dict[str, list[dict]] = {}
    for source, docs in by_source.items():
        for d in docs:
            if len(tok.encode(d["text"]).ids) < min_tokens:
                continue
            lines = d["text"].split("\n")
            text = ""
            for i in range(len(lines)):
                text = "\n".join(lines[:i + 1]) + "\n"
                if len(tok.encode(text).ids) >= min_tokens:
                    break
            cut_docs.setdefault(source, []).append(
                {"text": text, "source": source, "name": d["name"]})
    picked = []
    while len(picked) < count and any(cut_docs.values()):
        for source in sorted(cut_docs):
            if cut_docs[source] and len(picked) < count:
                picked.append(cut_docs[source].pop(0))
    return picked


@torch.no_grad()
def windows_loss(model, id_lists: list[list[int]], window: int, batch_size: int):
    """Sum of next-token losses and number of predicted tokens over each list cut into windows."""
    chunks = []
    for ids in id_lists:
        for i in range(0, len(ids), window):
            c = ids[i:i + window]
            if len(c) >= 2:
                chunks.append(c)
    chunks.sort(key=len)
    total, count = 0.0, 0
    for i in range(0, len(chunks), batch_size):
        group = chunks[i:i + batch_size]
        n = max(len(c) for c in group)
        x = torch.full((len(group), n), 1, dtype=torch.long)
        mask = torch.zeros((len(group), n), dtype=torch.long)
        for j, c in enumerate(group):
            x[j, :len(c)] = torch.tensor(c)
            mask[j, :len(c)] = 1
        labels = x.masked_fill(mask == 0, -100)
        logits = model(input_ids=x, attention_mask=mask).logits.float()
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1),
            ignore_index=-100, reduction="sum")
        total += loss.item()
        count += int((labels[:, 1:] != -100).sum())
    return total, count


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    from tokenizers import ByteLevelBPETokenizer
    from transformers import OPTConfig, OPTForCausalLM

    data = pathlib.Path(args.data)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((data / "manifest.json").read_text())
    ckpt = torch.load(args.ckpt, map_location="cpu", weights_only=False)
    run, state = ckpt["run"], ckpt["state"]

    config = OPTConfig.from_dict(ckpt["config"])
    config._name_or_path = out.name
    model = OPTForCausalLM(config)
    model.load_state_dict(ckpt["model"])
    del ckpt
    model = model.half()
    model.save_pretrained(out, safe_serialization=True)
    (out / "model.safetensors").chmod(0o644)
    # transformers 5 writes "dtype"; older readers look for "torch_dtype".
    cfg = json.loads((out / "config.json").read_text())
    cfg.setdefault("torch_dtype", cfg.get("dtype", "float16"))
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

    for f in ("vocab.json", "merges.txt"):
        shutil.copyfile(data / "tokenizer" / f, out / f)
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GPT2Tokenizer", "add_bos_token": True, "add_prefix_space": False,
        "bos_token": "</s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "model_max_length": config.max_position_embeddings, "errors": "replace"}, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(json.dumps({
        "bos_token": "</s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"},
        indent=2) + "\n")

    tok = ByteLevelBPETokenizer(str(out / "vocab.json"), str(out / "merges.txt"),
                                add_prefix_space=False)
    heldout = [json.loads(l) for l in open(data / "heldout.jsonl", encoding="utf-8")]
    eval_texts = pick_eval_texts(heldout, tok, args.eval_texts, args.eval_min_tokens)
    with open(out / "eval.jsonl", "w", encoding="utf-8") as f:
        for e in eval_texts:
            f.write(json.dumps({"text": e["text"]}, ensure_ascii=False) + "\n")
    print(f"eval.jsonl: {len(eval_texts)} texts", flush=True)

    results = None
    if not args.no_eval:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        t0 = time.time()
        hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
        hf.eval()
        hf_tok = AutoTokenizer.from_pretrained(out)
        window = config.max_position_embeddings
        probe = heldout[0]["text"][:2000]
        assert hf_tok(probe).input_ids == [2] + tok.encode(probe).ids, "tokenizer mismatch"
        per_source: dict[str, list[float]] = {}
        scored = heldout[:args.max_heldout_docs] if args.max_heldout_docs else heldout
        for d in scored:
            s = per_source.setdefault(d["source"], [0.0, 0])
            loss, n = windows_loss(hf, [hf_tok(d["text"]).input_ids], window, args.batch_size)
            s[0] += loss
            s[1] += n
        total = [sum(v[0] for v in per_source.values()), sum(v[1] for v in per_source.values())]
        ev_loss, ev_n = windows_loss(
            hf, [hf_tok(e["text"]).input_ids[:window] for e in eval_texts], window,
            args.batch_size)
        results = {
            "heldout": {"tokens": total[1], "loss": total[0] / total[1],
                        "ppl": math.exp(total[0] / total[1])},
            "by_source": {k: {"tokens": v[1], "loss": v[0] / v[1], "ppl": math.exp(v[0] / v[1])}
                          for k, v in sorted(per_source.items())},
            "eval_jsonl": {"texts": len(eval_texts), "tokens": ev_n, "loss": ev_loss / ev_n,
                           "ppl": math.exp(ev_loss / ev_n)},
        }
        print(json.dumps(results, indent=2), f"({time.time() - t0:.0f} s)", flush=True)

    n_params = sum(p.numel() for p in model.parameters())
    write_readme(out, args, manifest, run, state, config, n_params, eval_texts, results)
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"{out}: {size / 1e6:.1f} MB", flush=True)
    return 0


def write_readme(out, args, manifest, run, state, config, n_params, eval_texts, results):
    splits = manifest["splits"]
    pkgs = manifest["packages"]

    def pkg_line(pattern: str) -> str:
        import fnmatch
        names = [f"{n} {v}" for n, v in sorted(pkgs.items()) if fnmatch.fnmatch(n, pattern)]
        return ", ".join(names) or pattern

    src_rows = []
    for source, (pattern, title) in SOURCE_TITLES.items():
        tr = splits["train"]["by_source"].get(source, {"documents": 0, "characters": 0,
                                                         "tokens": 0})
        he = splits["heldout"]["by_source"].get(source, {"documents": 0, "characters": 0,
                                                          "tokens": 0})
        src_rows.append(
            f"| {title} | {pkg_line(pattern)} | {tr['documents']:,} / {tr['characters']:,} / "
            f"{tr['tokens']:,} | {he['documents']:,} / {he['characters']:,} / {he['tokens']:,} |")
    tr, he = splits["train"], splits["heldout"]
    src_rows.append(f"| **total** | | {tr['documents']:,} / {tr['characters']:,} / "
                    f"{tr['tokens']:,} | {he['documents']:,} / {he['characters']:,} / "
                    f"{he['tokens']:,} |")
    n_embed = config.vocab_size * config.hidden_size
    n_pos = (config.max_position_embeddings + 2) * config.hidden_size
    tokens_per_step = run["batch_size"] * run["grad_accum"] * run["seq_len"]
    epochs = state["tokens"] / tr["tokens"]
    lines = [
        f"# {out.name}",
        "",
        "A small OPT-architecture causal language model (`OPTForCausalLM`, pre-LN) trained from "
        "scratch on English text from Debian's main archive: the King James Bible, the Linux "
        "kernel's and Python's documentation, the Jargon File and The Devil's Dictionary. It is "
        "a test model for offgen: it writes plausible-looking KJV verses and reStructuredText, "
        "not sense.",
        "",
        "## Files",
        "",
        "- `config.json`: OPT config (`do_layer_norm_before: true`, ReLU, tied LM head, "
        "`dtype` / `torch_dtype`: float16)",
        "- `model.safetensors`: weights in fp16",
        "- `vocab.json`, `merges.txt`: byte-level BPE (GPT-2 / OPT format), "
        "`tokenizer_config.json`, `special_tokens_map.json`: GPT2Tokenizer settings as in OPT",
        f"- `eval.jsonl`: {len(eval_texts)} held-out texts of {args.eval_min_tokens}+ tokens, "
        "`{\"text\": ...}` per line (the start of a held-out document, cut at a line end)",
        "",
        "## Model",
        "",
        "| | |",
        "| --- | --- |",
        f"| parameters | {n_params:,} ({n_params - n_embed - n_pos:,} without the token and "
        "position embeddings) |",
        f"| layers / hidden / heads / ffn | {config.num_hidden_layers} / {config.hidden_size} / "
        f"{config.num_attention_heads} / {config.ffn_dim} |",
        f"| positions | {config.max_position_embeddings} |",
        f"| vocabulary | {config.vocab_size} (byte-level BPE trained on the training split) |",
        "| special tokens | `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3 as in OPT; bos = eos = 2 "
        "(`</s>`, prepended to every document and prompt), pad = 1 |",
        "",
        "## Corpus",
        "",
        "Whole documents are held out, never lines: the books Ruth, Esther, Jonah, Galatians "
        "and James, and every kernel or Python document whose path hashes (SHA-1) to 0 mod 40. "
        "Counts are documents / characters / tokens (tokens include one `</s>` per document).",
        "",
        "| source | Debian package | train | held out |",
        "| --- | --- | --- | --- |",
        *src_rows,
        "",
        "The corpus and tokenizer are rebuilt by `tools/prepare_corpus.py`.",
        "",
        "## Training",
        "",
        "`tools/train_small_opt.py`: random windows of "
        f"{run['seq_len']} tokens ({run['doc_start_frac']:.0%} of them starting at a document's "
        f"`</s>`), {run['batch_size'] * run['grad_accum']} sequences ({tokens_per_step:,} tokens) "
        f"per step, AdamW (betas 0.9/{run['beta2']}, weight decay {run['weight_decay']}), "
        f"learning rate {run['lr']:g} with {run['warmup']} warmup steps and cosine decay to "
        f"{run['lr'] * run['min_lr_ratio']:g}, gradient clipping at {run['clip']}, fp32, no "
        "dropout.",
    ]
    if run.get("init_from"):
        lines += [
            "",
            f"Continued from `{run['init_from']}` (its weights as the start, the same tokenizer) "
            "with long-distance copying in the data: "
            f"{run.get('copy_frac', 0):.0%} of the windows have 1 to {run.get('copy_spans', 3)} "
            "spans of 4-64 tokens (three in four random token ids, the others the window's own "
            "text) written again later in the window, at a distance drawn uniformly from what "
            f"the window allows, and {run.get('repeat_frac', 0):.0%} of the windows are a "
            "random sequence of 8-256 token ids repeated to the window's end, so induction "
            "(copy) heads form.",
        ]
    lines += [
        "",
        "| | |",
        "| --- | --- |",
        f"| steps | {state['step']:,} of {run['steps']:,} |",
        f"| tokens seen | {state['tokens']:,} ({epochs:.2f} epochs of the training split) |",
        f"| wall time | {state['train_seconds'] / 60:.0f} minutes of training steps |",
        f"| hardware | {args.hardware} |",
    ]
    if state.get("last_eval"):
        e = state["last_eval"]
        lines.append(f"| last held-out loss in training | {e['loss']:.3f} at step {e['step']} "
                     f"(16 windows) |")
    lines += ["", "## Evaluation", ""]
    if results:
        lines += [
            "Measured with transformers on this directory (fp16 weights loaded as fp32, "
            f"{config.max_position_embeddings}-token windows, each document starting with `</s>`):",
            "",
            "| text | tokens scored | loss | perplexity |",
            "| --- | --- | --- | --- |",
            f"| all held-out documents | {results['heldout']['tokens']:,} | "
            f"{results['heldout']['loss']:.3f} | {results['heldout']['ppl']:.2f} |",
        ]
        for k, v in results["by_source"].items():
            lines.append(f"| held-out {k} | {v['tokens']:,} | {v['loss']:.3f} | {v['ppl']:.2f} |")
        ev = results["eval_jsonl"]
        lines.append(f"| `eval.jsonl` (first {config.max_position_embeddings} tokens of each) | "
                     f"{ev['tokens']:,} | {ev['loss']:.3f} | {ev['ppl']:.2f} |")
    else:
        lines.append("Not measured for this export.")
    lines += [
        "",
        "## Licence",
        "",
        "The weights are derived from GPL-2.0 (kernel documentation), PSF-licensed (Python "
        "documentation) and public-domain texts; treat them as GPL-2.0.",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
