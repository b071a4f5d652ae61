#!/usr/bin/env python3
"""Makes the tokenizer.json fixtures in tests/data/tokenizer/json/ from Hugging Face `tokenizers`.

Run from anywhere (needs the PyPI package `tokenizers`; the fixtures were made with 0.23.3):

    python3 tools/make_tokenizer_json_fixtures.py            # writes tests/data/tokenizer/json/
    python3 tools/make_tokenizer_json_fixtures.py --out DIR  # somewhere else

Real LLaMA / Mistral / Qwen tokenizer files cannot be downloaded here, so this trains small ones
with `tokenizers` whose every component is configured as in the published files, on the corpus
of tools/make_tokenizer_fixtures.py (the licenses in /usr/share/common-licenses, the running
Python's stdlib sources, its multilingual samples). Each directory holds:

  tokenizer.json  The tokenizer, saved by `tokenizers` itself.
  parity.jsonl    One {"text": ..., "ids": [...]} per line: `tokenizers`' encode(text,
                  add_special_tokens=False). A line carries "decoded" too where decode(ids,
                  skip_special_tokens=False) is not the text itself (LLaMA 2's decoder drops a
                  leading space, for one).
  decode.jsonl    Random id sequences (specials, byte tokens, anything) and their decode: the
                  decoder chain on ids no encode would produce (cut UTF-8, leading specials).

The directories:

  llama3-style    LLaMA 3: BPE with ignore_merges, no normalizer, pre-tokenizer
                  Sequence[Split(Regex(LLaMA 3's pattern), Isolated), ByteLevel(use_regex=false)],
                  ByteLevel decoder, post-processor Sequence[ByteLevel, TemplateProcessing
                  "<|begin_of_text|> $A"], special tokens after the vocabulary (ids past the
                  model's, as 128000.. are in LLaMA 3), including reserved tokens whose names are
                  prefixes of one another. 3000 trained tokens plus some whole words no merge
                  produces (as tiktoken-converted vocabularies have), which only ignore_merges
                  finds; the test strings include each of them.
  llama2-style    LLaMA 2 / Mistral v0.1: normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no
                  pre-tokenizer, BPE with byte_fallback, fuse_unk, unk "<unk>", ids 0..2
                  <unk> <s> </s> and 3..258 <0x00>..<0xFF>; decoder Sequence[Replace("▁", " "),
                  ByteFallback, Fuse, Strip(" ", 1, 0)]; TemplateProcessing "<s> $A"; merges in
                  the "a b" string form. 3000 tokens, trained with a Metaspace split (words never
                  span spaces, as in sentencepiece) that the saved file then drops, and a limited
                  alphabet so that byte fallback is common.
  qwen2-style     Qwen2: the llama3-style model without ignore_merges (continuing_subword_prefix
                  and end_of_word_suffix "", as Qwen2 writes them), NFC normalizer, Qwen2's split
                  pattern (single digits), ByteLevel post-processor (no BOS). Its added tokens are
                  Qwen2's three plus four that exercise the AddedToken flags no LLaMA file uses:
                  lstrip, rstrip, single_word and a normalized (NFC) non-special token.
  metaspace-style LLaMA 2 as transformers converts it today (legacy=False): the llama2-style model
                  with no normalizer and a Metaspace(prepend_scheme="first", split=false)
                  pre-tokenizer.

and, in the top directory, components.json: single normalizers, pre-tokenizers and decoders
with their `tokenizers` output on hand-picked inputs (every Split behaviour, Metaspace schemes,
Strip, Oniguruma escapes that PCRE2 spells differently, ...), for unit tests of each component.

The test strings are tools/make_tokenizer_fixtures.py's (~3000: prose, code, many scripts, emoji,
whitespace runs, digits, contractions, random mixtures), cut to 100 characters, plus case-folding,
NFC and "▁" cases, and those strings with the file's special-token text spliced in. Everything is
deterministic; the script checks that every file stays under 600 KB.
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
import make_tokenizer_fixtures as base  # noqa: E402  (the corpus and the test strings)

SEED = 20250211
REPO = pathlib.Path(__file__).resolve().parent.parent
MAX_FILE_BYTES = 600_000
MAX_CHARS = 100

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

LLAMA3_SPECIALS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
    "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
] + [f"<|reserved_special_token_{i}|>" for i in range(3, 14)]
LLAMA2_SPECIALS = ["<unk>", "<s>", "</s>"]
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
QWEN2_ADDED = [
    AddedToken("<|endoftext|>", special=True, normalized=False),
    AddedToken("<|im_start|>", special=True, normalized=False),
    AddedToken("<|im_end|>", special=True, normalized=False),
    AddedToken("<mask>", special=True, normalized=False, lstrip=True),
    AddedToken("<pad>", special=False, normalized=False, rstrip=True),
    AddedToken("[WORD]", special=False, normalized=False, single_word=True),
    AddedToken("e\u0301tude", special=False, normalized=True),  # NFC makes it "étude"
]


# --- Training ---------------------------------------------------------------------------------

def train_llama3(corpus: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tok = with_unmerged_words(tok)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False)
                            for s in LLAMA3_SPECIALS])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    return tok


def with_unmerged_words(tok: Tokenizer) -> Tokenizer:
    """Adds whole words to the vocabulary that no merge produces, as tiktoken-converted files
    (LLaMA 3) have: only ignore_merges turns such a pre-token into its one token."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    added = 0
    for word in sorted(set(base.WORDS + ["Licensor", "Derivative", "warranties", "Contributor",
                                         "otherwise", "distribution", "Hello", "world"])):
        for text in (word, " " + word):
            ids = tok.encode(text).ids
            spelled = "".join(tok.id_to_token(i) for i in ids)
            if len(ids) >= 2 and spelled not in vocab:
                vocab[spelled] = len(vocab)
                added += 1
    assert added >= 20, added
    return Tokenizer.from_str(json.dumps(data))


def train_llama2(corpus: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    # Training only: words never span a "▁", as sentencepiece's never span a space.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first",
                                                 split=True)
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, show_progress=False,
                                  special_tokens=LLAMA2_SPECIALS + BYTE_TOKENS, limit_alphabet=600)
    tok.train_from_iterator(corpus, trainer)
    data = json.loads(tok.to_str())
    # The byte tokens belong to the model's vocabulary only, as in LLaMA 2's file.
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] in LLAMA2_SPECIALS]
    for t in data["added_tokens"]:
        t["normalized"] = False
        t["special"] = True
    data["pre_tokenizer"] = None
    data["decoder"] = json.loads(decoders.Sequence([
        decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(" ", 1, 0)]).__getstate__())
    data["post_processor"] = json.loads(processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]).__getstate__())
    tok = Tokenizer.from_str(json.dumps(data))
    vocab = tok.get_vocab(with_added_tokens=False)
    for i, token in enumerate(LLAMA2_SPECIALS + BYTE_TOKENS):
        assert vocab[token] == i, (token, vocab[token])
    return tok


def qwen2_from(llama3: Tokenizer) -> Tokenizer:
    data = json.loads(llama3.to_str())
    data["added_tokens"] = []
    data["normalizer"] = {"type": "NFC"}
    data["pre_tokenizer"] = json.loads(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ]).__getstate__())
    byte_level = json.loads(processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                                 use_regex=False).__getstate__())
    data["post_processor"] = byte_level
    data["decoder"] = dict(byte_level)
    data["model"]["ignore_merges"] = False
    data["model"]["continuing_subword_prefix"] = ""
    data["model"]["end_of_word_suffix"] = ""
    tok = Tokenizer.from_str(json.dumps(data))
    for token in QWEN2_ADDED:
        if token.special:
            tok.add_special_tokens([token])
        else:
            tok.add_tokens([token])
    return tok


def metaspace_from(llama2: Tokenizer) -> Tokenizer:
    data = json.loads(llama2.to_str())
    data["normalizer"] = None
    data["pre_tokenizer"] = json.loads(pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="first", split=False).__getstate__())
    return Tokenizer.from_str(json.dumps(data))


# --- Test strings -----------------------------------------------------------------------------

# Case folding (Oniguruma and PCRE2 both fold "ſ" to s and "K" (Kelvin) to k), anchors, NFC
# (reordering, Hangul, singletons, exclusions), "▁" in the input, lone surrogates' neighbours.
TRICKY = [
    "it'S IT'LL it'\u017f x'\u212a", "'S'T'RE'VE'M'LL'D", "'\u017fs", "don'T", "\u0130'll",
    "e\u0301", "\u00e9", "a\u0323\u0302", "a\u0302\u0323", "\u1100\u1161\u11a8", "\u1100\u1161",
    "\uac00\u11a8", "\u212b", "\u2126", "\u0958", "\u0344", "\u0f73", "\u1e0b\u0323",
    "q\u0307\u0323", "\u00c5\u0301", "\u0041\u030a\u0301", "\u2581", "\u2581\u2581x", "x \u2581 y",
    " \u2581", "<0x41>", "<0x0A>", "\u2581<0x41>", "123456789", "1234 5678", "\u0661\u0662\u0663\u0664",
    "  leading", "trailing  ", "\n\n\nx", "x\r\n\r\ny", " \n \n ", "\t\t x",
]


def special_strings(specials: list[str], plain: list[str], rng: random.Random) -> list[str]:
    """Text holding special-token strings: alone, glued to words, spaced, adjacent, cut short."""
    out = list(specials)
    out += [s + s for s in specials[:4]]
    out += [" " + s + " " for s in specials[:6]]
    out += [s[:-1] for s in specials[:6]] + [s[1:] for s in specials[:6]]
    for _ in range(160):
        text = rng.choice(plain)
        for _ in range(rng.randint(1, 3)):
            cut = rng.randint(0, len(text))
            sep = rng.choice(["", "", " ", "\n", "  "])
            text = text[:cut] + sep + rng.choice(specials) + rng.choice(["", " ", "\n"]) + text[cut:]
        out.append(text)
    return out


def ignore_merges_strings(tok: Tokenizer) -> list[str]:
    """Vocabulary tokens that BPE's merges alone would not produce, written out as text: with
    ignore_merges these must come out as the one token."""
    dec = decoders.ByteLevel()
    data = json.loads(tok.to_str())
    data["model"]["ignore_merges"] = False
    plain = Tokenizer.from_str(json.dumps(data))
    out = []
    for token, token_id in sorted(tok.get_vocab(with_added_tokens=False).items(),
                                  key=lambda kv: kv[1]):
        text = dec.decode([token])
        if "\ufffd" in text or not text:
            continue
        with_merges = plain.encode(text, add_special_tokens=False).ids
        direct = tok.encode(text, add_special_tokens=False).ids
        if direct == [token_id] and with_merges != direct:
            out.append(text)
    return out


def test_strings(specials: list[str], rng: random.Random) -> list[str]:
    # The base strings, cut to MAX_CHARS to keep the files small, except the runs of one to three
    # distinct characters (long pieces without split points, which BPE must handle whole).
    plain = [s if len(set(s)) <= 3 else s[:MAX_CHARS] for s in base.test_strings()]
    return plain + TRICKY + special_strings(specials, plain[30:], rng)


# --- Writing ----------------------------------------------------------------------------------

def write_jsonl(path: pathlib.Path, records: list[dict]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


def write_parity(tok: Tokenizer, out: pathlib.Path, strings: list[str]) -> None:
    records = []
    for text in strings:
        ids = tok.encode(text, add_special_tokens=False).ids
        record = {"text": text, "ids": ids}
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != text:
            record["decoded"] = decoded
        records.append(record)
    write_jsonl(out / "parity.jsonl", records)
    differ = sum("decoded" in r for r in records)
    print(f"{out.name}: {len(records)} strings, {differ} decode to other text")


def write_decode(tok: Tokenizer, out: pathlib.Path, rng: random.Random) -> None:
    size = tok.get_vocab_size(with_added_tokens=True)
    specials = [t.content for t in tok.get_added_tokens_decoder().values()]
    special_ids = [tok.token_to_id(s) for s in specials]
    byte_ids = [i for i in (tok.token_to_id(b) for b in BYTE_TOKENS) if i is not None]
    records = [{"ids": [], "text": tok.decode([], skip_special_tokens=False)}]
    for _ in range(300):
        ids = []
        for _ in range(rng.randint(1, 12)):
            kind = rng.random()
            if kind < 0.15:
                ids.append(rng.choice(special_ids))
            elif kind < 0.35 and byte_ids:
                ids.append(rng.choice(byte_ids))
            elif kind < 0.4:
                ids.append(size + rng.randint(0, 5))  # no such id: skipped
            else:
                ids.append(rng.randrange(size))
        records.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False)})
    write_jsonl(out / "decode.jsonl", records)


def write_tokenizer(tok: Tokenizer, out: pathlib.Path, strings: list[str],
                    rng: random.Random, string_merges: bool = False) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    if string_merges:  # the older "a b" form of merges, as LLaMA 2's and LLaMA 3's files have
        data = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
        assert not any(" " in a or " " in b for a, b in data["model"]["merges"])
        data["model"]["merges"] = [f"{a} {b}" for a, b in data["model"]["merges"]]
        with open(out / "tokenizer.json", "w", encoding="utf-8", newline="\n") as f:
            json.dump(data, f, ensure_ascii=False, indent=2)
    # What the tests load is the saved file: check it encodes as the object does.
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    write_parity(tok, out, strings)
    write_decode(tok, out, rng)


# --- Components -------------------------------------------------------------------------------

COMPONENT_TEXTS = [
    "", "Hello world", " Hello  world ", "The-final--countdown", "a\nb\r\nc\td",
    "it's  IT'S x'\u017f", "x = f(a, b)+12345;", "caf\u00e9 e\u0301t\u00e9 \u212b",
    "\u2581already\u2581meta", "  two  spaces  ", "\u65e5\u672c\u8a9e 123 \U0001F600!",
    "ab_\u0301c\u00b2d 0xDEADbeef \u0663\u00b2 \u000b|\u0085|\u180e|", "a\na\n", "xaxxbx",
]


def normalizer_texts() -> list[str]:
    """Marks in every order after bases that compose with some of them, Hangul jamo, singletons
    and composition exclusions: where NFC / NFD tables and ordering rules show."""
    rng = random.Random(SEED + 1)
    marks = [0x0300, 0x0301, 0x0302, 0x0303, 0x0308, 0x030A, 0x0323, 0x0327, 0x0328, 0x0334,
             0x0345, 0x05B8, 0x05C1, 0x064E, 0x0651, 0x093C, 0x094D, 0x0F72, 0x0F74, 0x1DCE,
             0x1AB0, 0x0898, 0x302A, 0x3099, 0x309A]
    bases = [0x41, 0x61, 0x45, 0x4F, 0x55, 0x75, 0x3B1, 0x3C9, 0x1100, 0x1161, 0x11A8, 0xAC00,
             0xAC01, 0x0915, 0x0928, 0x0F40, 0x212B, 0x2126, 0x00C5, 0x1E0B, 0x0958, 0x0344,
             0x304B, 0x30CF, 0x05E9, 0x0627, 0x20]
    texts = TRICKY[5:20]
    for _ in range(300):
        texts.append("".join(chr(rng.choice(rng.choice([marks, marks, bases])))
                             for _ in range(rng.randint(1, 8))))
    return texts


def components() -> list[dict]:
    """Single components and `tokenizers`' output for COMPONENT_TEXTS (or token lists)."""
    out = []

    def pre(p) -> None:
        cases = [[t, [s for s, _ in p.pre_tokenize_str(t)]] for t in COMPONENT_TEXTS]
        out.append({"kind": "pre_tokenizer", "config": json.loads(p.__getstate__()),
                    "cases": cases})

    def norm(n) -> None:
        cases = [[t, n.normalize_str(t)] for t in COMPONENT_TEXTS + normalizer_texts()]
        out.append({"kind": "normalizer", "config": json.loads(n.__getstate__()), "cases": cases})

    def dec(d, token_lists) -> None:
        cases = []
        for tokens in token_lists:
            try:
                cases.append([tokens, d.decode(tokens)])
            except BaseException:  # noqa: B036  Strip panics on tokens shorter than `stop`
                continue
        out.append({"kind": "decoder", "config": json.loads(d.__getstate__()), "cases": cases})

    split = pre_tokenizers.Split
    for behavior in ["removed", "isolated", "merged_with_previous", "merged_with_next",
                     "contiguous"]:
        for invert in [False, True]:
            pre(split("-", behavior, invert=invert))
            pre(split(Regex(r"\s+|-"), behavior, invert=invert))
    for pattern in [r"x*", r"\h+", r"\w+", r"\W", r"\d+", r"\s", r"\S+", r"\v", r"^a|a$",
                    r"\u0041|\p{Lu}+", r"[^\s\p{L}]+", r"(?i:'s|x)", r"\p{N}{1,3}", r"\pL+",
                    r"\P{L}+", r"(?m:.)", r".", LLAMA3_PATTERN, QWEN2_PATTERN]:
        pre(split(Regex(pattern), "isolated", invert=False))
    for scheme in ["always", "first", "never"]:
        for do_split in [True, False]:
            pre(pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=scheme,
                                         split=do_split))
    pre(pre_tokenizers.Metaspace(replacement="_", prepend_scheme="always", split=True))
    for prefix in [False, True]:
        for use_regex in [False, True]:
            pre(pre_tokenizers.ByteLevel(add_prefix_space=prefix, use_regex=use_regex))
    pre(pre_tokenizers.Sequence([split(Regex(LLAMA3_PATTERN), "isolated"),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                          use_regex=False)]))
    pre(pre_tokenizers.Sequence([pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                          use_regex=False),
                                 split("\u0120", "merged_with_next")]))

    norm(normalizers.NFC())
    norm(normalizers.NFD())
    norm(normalizers.Prepend("\u2581"))
    norm(normalizers.Replace(" ", "\u2581"))
    norm(normalizers.Replace(Regex(r"\s+"), " "))
    norm(normalizers.Replace("", "x"))
    norm(normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]))

    token_lists = [
        [], ["Hello", "\u2581world"], ["\u2581Hello", "\u2581", "\u2581world\u2581"],
        ["\u2581\u2581x"], ["<0x41>", "<0x42>", "c"], ["<0xE6>", "<0x97>", "<0xA5>", "x"],
        ["<0xE6>", "<0x97>", "y", "<0xFF>"], ["<0x+5>", "<0xg1>", "<0x4a>", "<0X41>", "<0x41"],
        ["  a  ", " ", "b "], ["\u0120Hello", "\u0120w\u00c3\u00b6rld", "\u00e6\u0139"],
        ["\u00e6\u0139\u00a5", "\u2713ok", "<|eot_id|>"], ["\u00e6", "x", "\u0139\u00a5"],
        ["H", "HH", "Hey", "yy"],
    ]
    dec(decoders.ByteLevel(), token_lists)
    dec(decoders.ByteFallback(), token_lists)
    dec(decoders.Fuse(), token_lists)
    for start, stop in [(1, 0), (0, 1), (2, 2), (5, 0)]:
        dec(decoders.Strip(" ", start, stop), token_lists)
    dec(decoders.Strip("H", 1, 1), token_lists)
    dec(decoders.Replace("\u2581", " "), token_lists)
    dec(decoders.Replace(Regex(r"\u2581+"), "_"), token_lists)
    for scheme in ["always", "first", "never"]:
        dec(decoders.Metaspace(replacement="\u2581", prepend_scheme=scheme, split=True),
            token_lists)
    dec(decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                           decoders.Fuse(), decoders.Strip(" ", 1, 0)]), token_lists)
    dec(decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(), decoders.Fuse()]),
        token_lists)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "tests/data/tokenizer/json")
    args = parser.parse_args()
    out: pathlib.Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    corpus = base.corpus_texts()

    llama3 = train_llama3(corpus)
    llama2 = train_llama2(corpus)
    qwen2 = qwen2_from(llama3)
    metaspace = metaspace_from(llama2)

    rng = random.Random(SEED)
    llama3_strings = test_strings(LLAMA3_SPECIALS, rng) + ignore_merges_strings(llama3)
    write_tokenizer(llama3, out / "llama3-style", llama3_strings, rng)
    write_tokenizer(llama2, out / "llama2-style", test_strings(LLAMA2_SPECIALS, rng), rng,
                    string_merges=True)
    # The variants reuse a model already checked above: a third of the strings each.
    qwen2_specials = [t.content for t in QWEN2_ADDED] + ["\u00e9tude"]
    write_tokenizer(qwen2, out / "qwen2-style", test_strings(qwen2_specials, rng)[::3], rng)
    write_tokenizer(metaspace, out / "metaspace-style",
                    test_strings(LLAMA2_SPECIALS, rng)[1::3], rng)

    with open(out / "components.json", "w", encoding="utf-8", newline="\n") as f:
        json.dump(components(), f, ensure_ascii=False, indent=0)
        f.write("\n")

    sizes = {str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*"))
             if p.is_file()}
    print("sizes:", sizes)
    too_big = {name: size for name, size in sizes.items() if size > MAX_FILE_BYTES}
    assert not too_big, too_big


if __name__ == "__main__":
    main()
