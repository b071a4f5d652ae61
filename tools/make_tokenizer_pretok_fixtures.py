#!/usr/bin/env python3
"""More tokenizer.json fixtures: the Digits, Punctuation, Whitespace and WhitespaceSplit
pre-tokenizers and the Strip and Lowercase normalizers, inside Sequences as published files use
them. A sibling of tools/make_tokenizer_json_fixtures.py: same corpus, same test strings (plus
strings aimed at these components), same file formats, written beside its directories in
tests/data/tokenizer/json/ (that tool's own fixtures are left as they are).

Run from anywhere (needs the PyPI package `tokenizers`; made with 0.23.3):

    python3 tools/make_tokenizer_pretok_fixtures.py            # writes tests/data/tokenizer/json/
    python3 tools/make_tokenizer_pretok_fixtures.py --out DIR  # somewhere else

Each directory holds, exactly as make_tokenizer_json_fixtures.py writes them:

  tokenizer.json  A byte-level BPE tokenizer trained (2000 tokens) on that tool's corpus with the
                  normalizer and pre-tokenizer below, saved by `tokenizers` itself.
  parity.jsonl    {"text", "ids"[, "decoded"]} per line: encode(text, add_special_tokens=False),
                  and decode(ids, skip_special_tokens=False) where it is not the text.
  decode.jsonl    {"ids", "text"}: random id sequences and their decode.

The directories:

  smollm-style      SmolLM2 / StarCoder: no normalizer, pre-tokenizer
                    Sequence[Digits(individual_digits=true),
                             ByteLevel(add_prefix_space=false, trim_offsets=true, use_regex=true)],
                    BPE (no unk, no byte_fallback, ignore_merges false), post-processor
                    ByteLevel(add_prefix_space=true, trim_offsets=false, use_regex=true), decoder
                    ByteLevel(add_prefix_space=true, trim_offsets=true, use_regex=true), and
                    SmolLM2's 17 special tokens at ids 0..16 (<|endoftext|>, <|im_start|>,
                    <|im_end|>, <repo_name>, ...). llama.cpp calls this pre-tokenizer "smollm".
  falcon-style      Falcon's pre-tokenizer chain: Sequence[Punctuation(behavior=contiguous),
                    ByteLevel(add_prefix_space=false, trim_offsets=true, use_regex=true),
                    Digits(individual_digits=false), Split(Regex("[0-9][0-9][0-9]"), isolated)]
                    (Digits after ByteLevel sees the byte-level spelling: ASCII digits, and also
                    the byte characters that are Unicode numbers -- "²" "³" "¹" "¼" "½" "¾",
                    the spelling of bytes 0xB2 0xB3 0xB9 0xBC 0xBD 0xBE -- so "１" = EF BC 91,
                    spelled "ï¼ĳ", is cut around its "¼"), no normalizer, ByteLevel decoder,
                    special <|endoftext|>.
  whitespace-style  normalizer Sequence[Strip(left=true, right=true), Lowercase]; pre-tokenizer
                    Sequence[Whitespace, Digits(individual_digits=false),
                    ByteLevel(add_prefix_space=false, use_regex=false)]; ByteLevel decoder (the
                    dropped spaces do not come back: "decoded" lines). Added tokens <s>, </s>
                    (special, not normalized) and "[MASK]" (not special, normalized=true: with
                    Lowercase it matches "[mask]" too). Strip applies to each stretch of text
                    between added tokens.
  wsplit-style      normalizer Sequence[Lowercase, Strip(left=true, right=false)]; pre-tokenizer
                    Sequence[WhitespaceSplit, Punctuation(behavior=isolated),
                    Digits(individual_digits=true), ByteLevel(add_prefix_space=false,
                    use_regex=false)]; ByteLevel decoder; specials <s>, </s>.

and components-pretok.json, in components.json's format ([{kind, config, cases: [[input,
output], ...]}]): Digits (both ways), Punctuation (all five behaviours), Whitespace,
WhitespaceSplit, the four chains above, Strip (left, right, both, neither), Lowercase and
Sequence[Strip, Lowercase], on components.json's inputs plus COMPONENT_EXTRA below (digits of
other scripts, Unicode punctuation and ASCII symbols, whitespace kinds, case mappings that change
length or have no single-char lowercase).

Deterministic for a given corpus (the corpus includes the running Python's stdlib sources, as for
the sibling tool); every file is checked to stay under 600 KB.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_tokenizer_json_fixtures as tj  # noqa: E402  (corpus, strings, writers)
import make_tokenizer_fixtures as base  # noqa: E402

SEED = 20251127
REPO = pathlib.Path(__file__).resolve().parent.parent
VOCAB = 2000

SMOLLM_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>", "<file_sep>",
    "<filename>", "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>",
    "<jupyter_start>", "<jupyter_text>", "<jupyter_code>", "<jupyter_output>",
    "<jupyter_script>", "<empty_output>",
]
BOS_EOS = ["<s>", "</s>"]

# Aimed at these components: digits of many scripts (Digits uses char::is_numeric), Unicode
# punctuation vs ASCII symbols (Punctuation is ASCII punctuation or a Unicode P* category),
# Unicode whitespace kinds (and ZWSP, which is not whitespace), case mappings.
COMPONENT_EXTRA = [
    "abc123def4567", "x1y22z333", "1,000,000.50", "3.14159e-10", "v2.0.1-rc3", "0x1F 0b1010",
    "\u0661\u0662\u0663 \u0967\u0968\u0969 \uff11\uff12\uff13 \u00b2\u00b3 \u00bd \u2163 \u2460",
    "\U0001d7ce\U0001d7cf \U000104a0 \u0e51\u0e52", "Year2024was good", "12 34  56",
    "Hello, world! (Yes?) [no] {maybe}", "a--b__c..d,,e", "\u00bfQu\u00e9? \u00a1S\u00ed!",
    "\u201cquoted\u201d \u2018single\u2019 \u00abguillemets\u00bb \u2014 dash \u2013 en",
    "\u3001\u3002\u300c\u300d \uff01\uff1f", "$5 + 3 = 8 < 9 > 7 ^ ` | ~ @ # % &",
    "\u20ac5 \u00a9 \u00ae \u2122 \u00b0C \u00b1 \u00d7 \u00f7", "...!!!???", "'quoted' \"double\"",
    "don't won't y'all", "e.g. i.e. etc.", "http://a.b/c?d=e&f=g#h", "snake_case camelCase",
    " \t\n\r\u000b\u000c", "a\u00a0b\u2003c\u3000d\u2028e\u2029f\u0085g", "a\u200bb\u200dc\ufeffd",
    "  padded both  ", "\t\ttabs first", "trailing newline\n", "\n", "   ",
    "HELLO World \u00c9COLE \u00c0 \u00d8", "\u0130stanbul \u0049 \u0131", "\u039f\u0394\u039f\u03a3 \u03a3\u03c3\u03c2",
    "STRASSE \u1e9e \u00df", "\u212a \u212b \u2126", "\u01c5 \u01c4 \u01c6 \u1f88", "\u0400\u0416\u042f \u0531\u0532",
    "\u2160\u2161 \u24b6\u24b7 \uff21\uff22", "\U00010400\U00010401 \U0001e900", "\u1e9e\u1e9e\u1e9e",
    "Mixed CASE 123 With, PUNCT!", "x", "",
]


def bytelevel(prefix=False, trim=True, regex=True):
    return pre_tokenizers.ByteLevel(add_prefix_space=prefix, trim_offsets=trim, use_regex=regex)


def smollm_pre():
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                    bytelevel(False, True, True)])


def falcon_pre():
    return pre_tokenizers.Sequence([
        pre_tokenizers.Punctuation(behavior="contiguous"), bytelevel(False, True, True),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), behavior="isolated", invert=False),
    ])


def whitespace_norm():
    return normalizers.Sequence([normalizers.Strip(left=True, right=True), normalizers.Lowercase()])


def whitespace_pre():
    return pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                    pre_tokenizers.Digits(individual_digits=False),
                                    bytelevel(False, True, False)])


def wsplit_norm():
    return normalizers.Sequence([normalizers.Lowercase(), normalizers.Strip(left=True, right=False)])


def wsplit_pre():
    return pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                    pre_tokenizers.Punctuation(behavior="isolated"),
                                    pre_tokenizers.Digits(individual_digits=True),
                                    bytelevel(False, True, False)])


def train(corpus, normalizer, pre, specials):
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[AddedToken(s, special=True, normalized=False)
                                                  for s in specials])
    tok.train_from_iterator(corpus, trainer)
    for i, s in enumerate(specials):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    return tok


def make_styles(corpus):
    smollm = train(corpus, None, smollm_pre(), SMOLLM_SPECIALS)
    smollm.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False,
                                                 use_regex=True)
    falcon = train(corpus, None, falcon_pre(), ["<|endoftext|>"])
    whitespace = train(corpus, whitespace_norm(), whitespace_pre(), BOS_EOS)
    whitespace.add_tokens([AddedToken("[MASK]", special=False, normalized=True)])
    wsplit = train(corpus, wsplit_norm(), wsplit_pre(), BOS_EOS)
    return {"smollm-style": (smollm, SMOLLM_SPECIALS),
            "falcon-style": (falcon, ["<|endoftext|>"]),
            "whitespace-style": (whitespace, BOS_EOS + ["[MASK]", "[mask]"]),
            "wsplit-style": (wsplit, BOS_EOS)}


def check_smollm_layout(path: pathlib.Path):
    """The saved file's components are SmolLM2's, field for field."""
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["normalizer"] is None
    assert data["pre_tokenizer"] == {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    assert data["post_processor"] == {"type": "ByteLevel", "add_prefix_space": True,
                                      "trim_offsets": False, "use_regex": True}
    assert data["decoder"] == {"type": "ByteLevel", "add_prefix_space": True,
                               "trim_offsets": True, "use_regex": True}
    m = data["model"]
    assert m["type"] == "BPE" and m["unk_token"] is None and not m["byte_fallback"]
    assert not m["ignore_merges"] and not m["fuse_unk"]
    assert [t["content"] for t in data["added_tokens"]] == SMOLLM_SPECIALS
    assert [t["id"] for t in data["added_tokens"]] == list(range(len(SMOLLM_SPECIALS)))


def components() -> list[dict]:
    out = []
    texts = tj.COMPONENT_TEXTS + COMPONENT_EXTRA

    def pre(p) -> None:
        cases = [[t, [s for s, _ in p.pre_tokenize_str(t)]] for t in texts]
        out.append({"kind": "pre_tokenizer", "config": json.loads(p.__getstate__()),
                    "cases": cases})

    def norm(n) -> None:
        cases = [[t, n.normalize_str(t)] for t in texts]
        out.append({"kind": "normalizer", "config": json.loads(n.__getstate__()), "cases": cases})

    pre(pre_tokenizers.Digits(individual_digits=True))
    pre(pre_tokenizers.Digits(individual_digits=False))
    for behavior in ["isolated", "removed", "merged_with_previous", "merged_with_next",
                     "contiguous"]:
        pre(pre_tokenizers.Punctuation(behavior=behavior))
    pre(pre_tokenizers.Whitespace())
    pre(pre_tokenizers.WhitespaceSplit())
    pre(smollm_pre())
    pre(falcon_pre())
    pre(whitespace_pre())
    pre(wsplit_pre())
    for left, right in [(True, False), (False, True), (True, True), (False, False)]:
        norm(normalizers.Strip(left=left, right=right))
    norm(normalizers.Lowercase())
    norm(whitespace_norm())
    norm(wsplit_norm())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "tests/data/tokenizer/json")
    args = parser.parse_args()
    out: pathlib.Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    corpus = base.corpus_texts()
    rng = random.Random(SEED)
    extra = COMPONENT_EXTRA + [s + " " + t for s, t in zip(COMPONENT_EXTRA, COMPONENT_EXTRA[7:])]
    written = []
    for i, (name, (tok, specials)) in enumerate(make_styles(corpus).items()):
        strings = tj.test_strings(specials, rng)
        # smollm-style gets half the strings, the others a third each (>= 1000 lines each).
        strings = strings[i % 2::2] if name == "smollm-style" else strings[i % 3::3]
        tj.write_tokenizer(tok, out / name, strings + extra, rng)
        written.append(out / name)
    check_smollm_layout(out / "smollm-style" / "tokenizer.json")

    with open(out / "components-pretok.json", "w", encoding="utf-8", newline="\n") as f:
        json.dump(components(), f, ensure_ascii=False, indent=0)
        f.write("\n")

    files = [p for d in written for p in sorted(d.iterdir())] + [out / "components-pretok.json"]
    sizes = {str(p.relative_to(out)): p.stat().st_size for p in files}
    print("sizes:", sizes)
    too_big = {name: size for name, size in sizes.items() if size > tj.MAX_FILE_BYTES}
    assert not too_big, too_big


if __name__ == "__main__":
    main()
