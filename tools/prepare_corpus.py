#!/usr/bin/env python3
"""Builds the training corpus and the byte-level BPE tokenizer for tools/train_small_opt.py.

The corpus is English text that Debian ships in its main (DFSG-free) archive:

  bible-kjv-text + bible-kjv   The King James Bible (public domain), one document per book,
                               extracted with the `bible` program.
  linux-doc-<ver>              The Linux kernel's Documentation/ tree (GPL-2.0), reStructuredText
                               and plain-text files, one document per file; the translations/
                               (non-English) and devicetree/ (binding schemas) subtrees are left out.
  python3.<x>-doc              The Python documentation's reStructuredText sources (PSF licence),
                               html/_sources/**/*.rst.txt, one document per file.
  jargon-text                  The Jargon File 4.4.7 (public domain), one document.
  dict-devil                   Ambrose Bierce's "The Devil's Dictionary" (public domain), one document.

Install them first (Debian 12 names; another release may have another python3.<x>-doc /
linux-doc-<ver>, which the script finds by globbing):

    apt-get install --no-install-recommends bible-kjv bible-kjv-text linux-doc-6.1 \\
        python3.11-doc jargon-text dict-devil
    python3 tools/prepare_corpus.py --install   # the same apt-get, run for you

Then:

    python3 tools/prepare_corpus.py --out out/train [--vocab-size 8192]

The split is by whole documents, never by lines: five Bible books (Ruth, Esther, Jonah,
Galatians, James) and every kernel / Python document whose path hashes (SHA-1) to 0 mod 40 are
held out. The Jargon File and the Devil's Dictionary are training-only.

What it writes under --out:
  train.jsonl, heldout.jsonl   one {"source", "name", "text"} document per line
  tokenizer/vocab.json, tokenizer/merges.txt
                               tokenizers.ByteLevelBPETokenizer (add_prefix_space=False) trained on
                               the training split only; ids 0..3 are "<s>", "<pad>", "</s>", "<unk>"
                               as in OPT's vocabulary, so bos = eos = 2 ("</s>") and pad = 1.
  train.bin, heldout.bin       token ids (uint16, or uint32 for vocabularies over 65536), each
                               document preceded by "</s>" (id 2), as OPT's tokenizer prepends it.
  manifest.json                package versions, per-source document / character / token counts.

Everything is deterministic for the same package versions.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time

PACKAGES = ["bible-kjv", "bible-kjv-text", "linux-doc-6.1", "python3.11-doc", "jargon-text",
            "dict-devil"]
SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>"]
BOS_ID = 2  # "</s>", as in OPT
HELDOUT_BOOKS = {"Ruth", "Esther", "Jonah", "Galatians", "James"}
HELDOUT_MOD = 40

KJV_BOOKS = [
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
    "1 Samuel", "2 Samuel", "1 Kings", "2 Kings", "1 Chronicles", "2 Chronicles", "Ezra",
    "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon", "Isaiah",
    "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos", "Obadiah", "Jonah",
    "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah", "Malachi", "Matthew", "Mark",
    "Luke", "John", "Acts", "Romans", "1 Corinthians", "2 Corinthians", "Galatians", "Ephesians",
    "Philippians", "Colossians", "1 Thessalonians", "2 Thessalonians", "1 Timothy", "2 Timothy",
    "Titus", "Philemon", "Hebrews", "James", "1 Peter", "2 Peter", "1 John", "2 John", "3 John",
    "Jude", "Revelation",
]


def clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    # SPDX tags carry no language; drop them.
    lines = [line for line in lines if not line.lstrip(". ").startswith("SPDX-License-Identifier")]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


def held_out_path(rel: str) -> bool:
    return int(hashlib.sha1(rel.encode()).hexdigest(), 16) % HELDOUT_MOD == 0


def kjv_documents():
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, check=True, cwd="/").stdout
    verse = re.compile(r"^([0-9]?[A-Za-z]+)(\d+):(\d+) (.*)$")
    books: list[tuple[str, list[tuple[int, int, str]]]] = []
    for line in out.splitlines():
        if not line.strip():
            continue
        m = verse.match(line)
        if not m:
            raise SystemExit(f"unexpected line from bible: {line!r}")
        abbrev, ch, v, text = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if not books or books[-1][0] != abbrev:
            books.append((abbrev, []))
        books[-1][1].append((ch, v, text))
    if len(books) != len(KJV_BOOKS):
        raise SystemExit(f"expected {len(KJV_BOOKS)} books from bible, got {len(books)}")
    for name, (_, verses) in zip(KJV_BOOKS, books):
        parts = [name, ""]
        last_ch = None
        for ch, v, text in verses:
            if ch != last_ch:
                if last_ch is not None:
                    parts.append("")
                parts += [f"Chapter {ch}", ""]
                last_ch = ch
            parts.append(f"{v} {text}")
        yield "kjv", name, clean("\n".join(parts)), name in HELDOUT_BOOKS


def linux_doc_documents():
    roots = sorted(glob.glob("/usr/share/doc/linux-doc-*/Documentation"))
    if not roots:
        raise SystemExit("linux-doc-<version> is not installed")
    root = roots[-1]
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir.split(os.sep)[0] in ("translations", "devicetree"):
            dirnames[:] = []
            continue
        dirnames.sort()
        for f in filenames:
            if f.endswith((".rst.gz", ".txt.gz", ".rst", ".txt")):
                files.append(os.path.join(dirpath, f))
    for path in sorted(files):
        rel = os.path.relpath(path, root).removesuffix(".gz")
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            text = clean(f.read())
        if len(text) < 200:
            continue
        yield "linux-doc", "Documentation/" + rel, text, held_out_path("linux-doc/" + rel)


def python_doc_documents():
    roots = sorted(glob.glob("/usr/share/doc/python3.*/html/_sources"))
    if not roots:
        raise SystemExit("python3.<x>-doc is not installed")
    root = roots[-1]
    files = sorted(str(p) for p in pathlib.Path(root).rglob("*.txt"))
    for path in files:
        rel = os.path.relpath(path, root).removesuffix(".txt")
        with open(path, encoding="utf-8", errors="replace") as f:
            text = clean(f.read())
        if len(text) < 200:
            continue
        yield "python-doc", rel, text, held_out_path("python-doc/" + rel)


def jargon_documents():
    with gzip.open("/usr/share/doc/jargon-text/jargon.txt.gz", "rt", encoding="utf-8") as f:
        yield "jargon", "The Jargon File", clean(f.read()), False


def devil_documents():
    with gzip.open("/usr/share/dictd/devil.dict.dz", "rt", encoding="utf-8",
                   errors="replace") as f:
        text = f.read()
    # Drop the dictd header entries ("00-database-..."), keep the book from its title page on.
    start = text.find("The Internet Wiretap")
    if start > 0:
        text = text[text.rfind("\n", 0, start) + 1:]
    yield "devil", "The Devil's Dictionary", clean(text), False


def package_versions() -> dict[str, str]:
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"]
                         + ["bible-kjv", "bible-kjv-text", "jargon-text", "dict-devil"]
                         + ["linux-doc-*", "python3.*-doc"],
                         capture_output=True, text=True).stdout
    versions = {}
    for line in out.splitlines():
        name, _, ver = line.partition("\t")
        if ver:
            versions[name] = ver
    return versions


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/train", help="output folder (default out/train)")
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--install", action="store_true", help="apt-get install the packages first")
    ap.add_argument("--tokenizer", default=None,
                    help="a folder with vocab.json and merges.txt (e.g. a shipped model's) to "
                         "tokenize with, instead of training a new one: for continued training")
    args = ap.parse_args()

    if args.install:
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends"] + PACKAGES,
                       check=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    stats: dict[str, dict[str, dict[str, int]]] = {"train": {}, "heldout": {}}
    docs = {"train": [], "heldout": []}
    for gen in (kjv_documents, linux_doc_documents, python_doc_documents, jargon_documents,
                devil_documents):
        for source, name, text, held in gen():
            split = "heldout" if held else "train"
            docs[split].append({"source": source, "name": name, "text": text})
            s = stats[split].setdefault(source, {"documents": 0, "characters": 0, "tokens": 0})
            s["documents"] += 1
            s["characters"] += len(text)
    for split, items in docs.items():
        with open(out / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for d in items:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        print(f"{split}: {len(items)} documents, {sum(len(d['text']) for d in items):,} characters",
              flush=True)

    # Tokenizer: byte-level BPE on the training split only (or a given one).
    from tokenizers import ByteLevelBPETokenizer
    if args.tokenizer:
        given = pathlib.Path(args.tokenizer)
        tok = ByteLevelBPETokenizer(str(given / "vocab.json"), str(given / "merges.txt"),
                                    add_prefix_space=False)
    else:
        tok = ByteLevelBPETokenizer(add_prefix_space=False)

        def text_iter():
            for d in docs["train"]:
                yield d["text"]

        tok.train_from_iterator(text_iter(), vocab_size=args.vocab_size, min_frequency=2,
                                special_tokens=SPECIAL_TOKENS, show_progress=False,
                                length=len(docs["train"]))
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(t) == i, (t, tok.token_to_id(t))
    (out / "tokenizer").mkdir(exist_ok=True)
    tok.save_model(str(out / "tokenizer"))
    print(f"tokenizer: {tok.get_vocab_size()} tokens ({time.time() - t0:.0f} s)", flush=True)

    import numpy as np
    dtype = np.uint16 if tok.get_vocab_size() <= 65536 else np.uint32
    for split, items in docs.items():
        encs = tok.encode_batch([d["text"] for d in items])
        arrays = []
        for d, e in zip(items, encs):
            ids = e.ids
            stats[split][d["source"]]["tokens"] += len(ids) + 1
            arrays.append(np.asarray([BOS_ID] + ids, dtype=dtype))
        arr = np.concatenate(arrays)
        arr.tofile(out / f"{split}.bin")
        print(f"{split}.bin: {len(arr):,} tokens", flush=True)

    manifest = {
        "packages": package_versions(),
        "vocab_size": tok.get_vocab_size(),
        "special_tokens": SPECIAL_TOKENS,
        "bos_id": BOS_ID,
        "dtype": np.dtype(dtype).name,
        "heldout_rule": {"kjv_books": sorted(HELDOUT_BOOKS),
                         "documents": f"sha1(source/path) % {HELDOUT_MOD} == 0"},
        "splits": {split: {"by_source": s,
                           "documents": sum(v["documents"] for v in s.values()),
                           "characters": sum(v["characters"] for v in s.values()),
                           "tokens": sum(v["tokens"] for v in s.values())}
                   for split, s in stats.items()},
    }
    with open(out / "manifest.json", "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(json.dumps(manifest["splits"], indent=2))
    print(f"done in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
