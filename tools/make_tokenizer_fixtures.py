#!/usr/bin/env python3
"""Makes the tokenizer fixtures in tests/data/tokenizer/ from Hugging Face `tokenizers`.

Run from anywhere (needs the PyPI packages `tokenizers`; `transformers` is optional):

    python3 tools/make_tokenizer_fixtures.py            # writes tests/data/tokenizer/
    python3 tools/make_tokenizer_fixtures.py --out DIR  # somewhere else

What it writes:
  vocab.json, merges.txt  A byte-level BPE (GPT-2 / OPT format) of exactly 1000 tokens, trained
                          with tokenizers.ByteLevelBPETokenizer (add_prefix_space=False) on a few
                          MB of English and code found on any Debian + Python machine: the texts in
                          /usr/share/common-licenses, the running Python's top-level stdlib *.py
                          files (sorted by name, until the corpus reaches 3 MB) and the
                          multilingual sample sentences below. Ids 0..3 are "<s>", "<pad>", "</s>",
                          "<unk>" as in OPT.
  parity.jsonl            ~3000 strings, one {"text": ..., "ids": [...]} per line, ids from HF's
                          encode of the saved files (no special tokens added). The C++ tokenizer
                          must produce exactly these ids and decode them back to the text.
  unicode_classes.txt     How HF's GPT-2 split regex classifies every code point (surrogates
                          excepted): "FIRST LAST CLASS" hex ranges, CLASS one of L (joins letters),
                          N (joins digits), S (whitespace), O (other), read off two probe splits
                          ("a" + c + "1" and c + "!"); tests/tokenizer repeats the probes on the
                          C++ pre-tokenizer. This pins the Unicode version of the \\p{L} / \\p{N} /
                          \\s classes, where PCRE2 and HF's Oniguruma can disagree.
  utf8_replace.txt        Random byte strings, mostly invalid UTF-8, as "INPUT_HEX OUTPUT_HEX"
                          with OUTPUT = INPUT.decode("utf-8", errors="replace").encode(): the
                          reference for to_valid_utf8().

Everything is deterministic: training and the test strings depend only on the corpus files and
the fixed seed, so a rerun on the same machine gives byte-identical files. A different Python
version (another stdlib) gives another vocabulary; the parity file always matches the vocabulary
written with it. The script checks that HF's decode(encode(s)) == s for every string and that
the files stay small.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys
import sysconfig
import tempfile

from tokenizers import ByteLevelBPETokenizer, pre_tokenizers

SEED = 20240613
VOCAB_SIZE = 1000
SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>"]
CORPUS_BYTES = 3_000_000
REPO = pathlib.Path(__file__).resolve().parent.parent

# Sentences in many scripts: part of the corpus (so the vocabulary has merges inside multi-byte
# characters, which the invalid-UTF-8 round trips exercise) and a source of test strings.
MULTILINGUAL = [
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Où est la bibliothèque ? Déjà vu, naïve façade, crème brûlée.",
    "Der schnelle braune Fuchs springt über den faulen Hund. Straße, Größe, Äpfel.",
    "¿Dónde está el baño? El niño comió piña y jalapeños.",
    "Ação, coração, não, pão — português do Brasil.",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Þú ert sæll. Ærø, Øresund, Åland.",
    "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο. Ελληνικά!",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Українська мова: їжак, ґанок, єнот. Беларуская: ўсё.",
    "Жълтата дюля беше щастлива. Србија, Црна Гора.",
    "中文是世界上使用人数最多的语言之一。我们今天去公园散步吧！",
    "日本語の文章です。ひらがな、カタカナ、漢字を使います。東京は大きい。",
    "한국어는 한글로 씁니다. 안녕하세요, 만나서 반갑습니다.",
    "اللغة العربية جميلة جدا. مرحبا بالعالم، كيف حالك؟",
    "עברית היא שפה שמית. שלום עולם!",
    "हिन्दी भारत की राजभाषा है। नमस्ते दुनिया, आप कैसे हैं?",
    "বাংলা ভাষা খুব সুন্দর। তামিল: தமிழ் மொழி. తెలుగు భాష.",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ สวัสดีครับ",
    "Tiếng Việt có nhiều dấu: Tiếng Việt, người, đường, phở.",
    "Հայերեն, ქართული ენა, አማርኛ, ᏣᎳᎩ, ᠮᠣᠩᠭᠣᠯ.",
    "Türkçe: ığdır, şişli, çok güzel. Azərbaycan dili.",
    "Emoji: 😀 😂 🥲 👍🏽 👩🏾‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇯🇵 🇫🇷 ❤️ 1️⃣ ✨",
    "Math: ∀x ∈ ℝ, x² ≥ 0; ∑ᵢ aᵢ ≤ ∞; π ≈ 3.14159; √2, ½, ¾, ⅓.",
    "Fullwidth ＡＢＣ１２３ and ideographic space:\u3000here. Ⅻ ⅷ ② ⑩.",
]

WORDS = [
    "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are",
    "as", "with", "his", "they", "I", "at", "be", "this", "have", "from", "or", "one", "had", "by",
    "word", "but", "not", "what", "all", "were", "we", "when", "your", "can", "said", "there",
    "License", "Software", "copyright", "def", "return", "self", "None", "import", "class",
    "lambda", "yield", "async", "await", "print", "value", "kwargs", "__init__", "0x1F",
]

EMOJI = [
    "😀", "😂", "🥲", "🤖", "🎉", "🔥", "💯", "🚀", "🌍", "🐍", "👍", "👍🏻", "👍🏼", "👍🏽", "👍🏾",
    "👍🏿", "👋🏽", "🧑🏿‍🚀", "👩‍💻", "👩🏾‍💻", "👨‍👩‍👧‍👦", "👨‍👨‍👧", "🏳️‍🌈", "🏴‍☠️",
    "❤️", "❤️‍🔥", "🫶🏼", "🇯🇵", "🇫🇷", "🇺🇸", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "#️⃣", "©️", "™️", "☺️",
    "🤷‍♀️", "🙋🏻‍♂️", "🧔🏽‍♀️", "🫠", "🪿",
]

COMBINING = [
    "e\u0301", "a\u0308\u0304", "n\u0303", "o\u0302\u0323", "A\u030a", "i\u0307\u0301",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349",
    "क\u094d\u0937", "ि", "\u0301", "\u0301\u0301abc", "ก\u0e49\u0e33", "\u05e9\u05c1\u05b8",
    "\u0928\u093f", "\u0645\u064e\u0651", "\u1100\u1161\u11a8", "e\u20dd", "x\u0332y\u0332",
]

SPACES = [" ", " ", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028",
          "\u2029", "\u0085", "\u1680", "\u2003", "\u2009", "\u202f", "\u205f", "\x0b", "\x0c",
          "\u200b", "\ufeff", "\u180e", "   ", "\t\t", " \n ", "\n    "]

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M",
                "'LL", "'D", "\u2019s", "\u2019t", "\u2019re", "\u2018s", "'x", "''s", "'", "''",
                "'st", "'ss", "'dd", "'lls", "'re's", "'sLL"]

PUNCT = list("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~") + [
    "...", "—", "–", "«", "»", "“", "”", "„", "‹›", "¡", "¿", "•", "…", "§", "¶", "†", "‡", "※",
    "→", "⇒", "≠", "±", "×", "÷", "€", "£", "¥", "₹", "₿", "°", "©", "®", "™", "。", "、", "！",
    "？", "「", "」", "【", "】", "،", "؟", "।", "॥", "<s>", "</s>", "<pad>", "<unk>"]

DIGITS = ["0", "7", "42", "1234567890", "3.14159", "1e-9", "-273.15", "1,000,000", "0xDEADBEEF",
          "٣٤٥", "३४५", "১২৩", "௧௨", "０１２", "²³", "½", "Ⅻ", "②", "𝟘𝟙𝟚", "٠.٥", "১০০%"]

# Code points drawn for the random mixtures: blocks where HF's classes and byte lengths vary.
RANDOM_BLOCKS = [
    (0x20, 0x7E), (0x00, 0x1F), (0x7F, 0xFF), (0x100, 0x24F), (0x300, 0x36F), (0x370, 0x3FF),
    (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF),
    (0x2000, 0x206F), (0x2070, 0x22FF), (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
    (0xE000, 0xE0FF), (0xFE00, 0xFFFD), (0x10000, 0x1007F), (0x1D400, 0x1D7FF),
    (0x1F300, 0x1FAFF), (0x20000, 0x2A6DF), (0xE0000, 0xE007F), (0x10FF00, 0x10FFFF),
    (0x1C89, 0x1C8A), (0x105C0, 0x105F3), (0x1E4D0, 0x1E4F9), (0x11F50, 0x11F59),
]


def corpus_parts() -> tuple[list[str], list[str]]:
    """The licenses and the stdlib sources of the corpus, together up to CORPUS_BYTES."""
    parts: tuple[list[str], list[str]] = ([], [])
    seen: set[pathlib.Path] = set()
    total = 0
    licenses = sorted(pathlib.Path("/usr/share/common-licenses").glob("*"))
    stdlib = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    for part, paths in zip(parts, (licenses, stdlib)):
        for path in paths:
            real = path.resolve()
            if real in seen or not real.is_file() or total >= CORPUS_BYTES:
                continue
            seen.add(real)
            text = real.read_text(encoding="utf-8", errors="replace")
            part.append(text)
            total += len(text.encode("utf-8"))
    if total < CORPUS_BYTES // 2:
        sys.exit(f"corpus too small ({total} bytes): need /usr/share/common-licenses and stdlib")
    return parts


def corpus_texts() -> list[str]:
    licenses, stdlib = corpus_parts()
    return licenses + stdlib + MULTILINGUAL * 100


def train(out: pathlib.Path) -> None:
    tokenizer = ByteLevelBPETokenizer(add_prefix_space=False)
    tokenizer.train_from_iterator(corpus_texts(), vocab_size=VOCAB_SIZE, min_frequency=2,
                                  special_tokens=SPECIAL_TOKENS, show_progress=False)
    vocab = tokenizer.get_vocab()
    assert len(vocab) == VOCAB_SIZE, len(vocab)
    for i, token in enumerate(SPECIAL_TOKENS):
        assert vocab[token] == i, (token, vocab[token])
    assert sorted(vocab.values()) == list(range(VOCAB_SIZE))
    tokenizer.save_model(str(out))


def pick_lines(texts: list[str], rng: random.Random, count: int, max_lines: int) -> list[str]:
    """`count` windows of 1..max_lines consecutive lines, kept as written (newlines included)."""
    picked = []
    while len(picked) < count:
        lines = rng.choice(texts).splitlines(keepends=True)
        if not lines:
            continue
        start = rng.randrange(len(lines))
        window = "".join(lines[start:start + rng.randint(1, max_lines)])
        if 0 < len(window) <= 400:
            picked.append(window)
    return picked


def random_mixture(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 24)):
        kind = rng.random()
        if kind < 0.45:
            lo, hi = rng.choice(RANDOM_BLOCKS)
            cp = rng.randint(lo, hi)
            parts.append(chr(cp) * rng.choice([1, 1, 1, 2, 3]))
        elif kind < 0.6:
            parts.append(rng.choice(SPACES))
        elif kind < 0.75:
            parts.append(rng.choice(WORDS))
        elif kind < 0.82:
            parts.append(rng.choice(CONTRACTIONS))
        elif kind < 0.9:
            parts.append(rng.choice(PUNCT))
        elif kind < 0.95:
            parts.append(rng.choice(EMOJI))
        else:
            parts.append(rng.choice(DIGITS))
    return "".join(parts)


def join_random(rng: random.Random, pools: list[list[str]], n: int) -> str:
    return "".join(rng.choice(rng.choice(pools)) for _ in range(n))


def test_strings() -> list[str]:
    rng = random.Random(SEED)
    licenses, stdlib = corpus_parts()
    strings: list[str] = []

    # Edge cases first: empty, single characters, lone specials, the special tokens' text.
    strings += ["", " ", "  ", "\n", "\t", "\r\n", "a", "A", "'", "'s", "s", "1", " 1", " a",
                "a ", " ' ", "\u00a0", "\u3000", "\u0085", "\x00", "\x7f", "\ufffd", "\U0010ffff",
                "</s>", "<s>hello</s>", "<pad><unk>", "Hello world", " Hello world",
                "Hello  world", "Hello world ", "Hello world  ", "hello\n\nworld\n"]
    # ASCII prose and code, as found in the corpus.
    strings += pick_lines(licenses, rng, 450, 4)
    strings += pick_lines(stdlib, rng, 450, 8)
    # Multilingual: the samples whole, and random cuts and mixes of them.
    strings += MULTILINGUAL
    for _ in range(250):
        sample = rng.choice(MULTILINGUAL)
        a = rng.randrange(len(sample))
        strings.append(sample[a:a + rng.randint(1, 40)])
    for _ in range(100):
        strings.append(" ".join(rng.choice(MULTILINGUAL).split()[0] for _ in range(4)))
    # Emoji, combining marks.
    for _ in range(150):
        strings.append(join_random(rng, [EMOJI, WORDS, [" ", "", "\u200d", "\ufe0f"]], 6))
    for _ in range(120):
        strings.append(join_random(rng, [COMBINING, WORDS, [" ", ""]], 5))
    # Whitespace runs between words and at the ends.
    for _ in range(300):
        s = join_random(rng, [SPACES, SPACES, WORDS], rng.randint(1, 8))
        strings.append(s + rng.choice(["", "", " ", "  ", "\n", "\t", " \n"]))
    # Contractions, any case, straight and curly apostrophes.
    for _ in range(250):
        word = rng.choice(WORDS + ["it", "IT", "we", "WE", "they", "don", "I", "You", "o"])
        strings.append(word + rng.choice(CONTRACTIONS) + rng.choice(["", " ", "!", " x", "s",
                                                                      "\n", "'s", "1"]))
    # Numbers: long digit runs, mixed with letters and other scripts' digits.
    for _ in range(200):
        choice = rng.random()
        if choice < 0.3:
            strings.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 80))))
        elif choice < 0.6:
            strings.append(join_random(rng, [DIGITS, [" ", "", ".", ",", "-", "x"]], 6))
        else:
            strings.append(join_random(rng, [DIGITS, WORDS, PUNCT, [" "]], 6))
    # Punctuation runs.
    for _ in range(150):
        strings.append(join_random(rng, [PUNCT, PUNCT, [" ", "", "\n"], WORDS], rng.randint(1, 10)))
    # Random mixtures.
    for _ in range(560):
        strings.append(random_mixture(rng))
    # A few long pieces without split points: BPE over hundreds of symbols.
    strings += ["9" * 500, "a" * 300, " " * 200 + "x", "\n" * 100, "ab" * 150,
                "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(400)),
                "-" * 120 + "=" * 120, "日本語" * 60, "😀" * 40]
    return strings


def classify_code_points(out: pathlib.Path) -> None:
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)

    def cls(c: str) -> str:
        a = [p for p, _ in pre.pre_tokenize_str("a" + c + "1")]
        if len(a) == 2:
            return "L" if a[1] == "1" else "N"
        b = [p for p, _ in pre.pre_tokenize_str(c + "!")]
        return "O" if len(b) == 1 else "S"

    ranges: list[list] = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        k = cls(chr(cp))
        if ranges and ranges[-1][2] == k and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp, k])
    with open(out / "unicode_classes.txt", "w", encoding="ascii", newline="\n") as f:
        f.write("# HF tokenizers ByteLevel split classes: FIRST LAST CLASS (hex, inclusive);\n")
        f.write("# written by tools/make_tokenizer_fixtures.py\n")
        for first, last, k in ranges:
            f.write(f"{first:04X} {last:04X} {k}\n")


def write_parity(out: pathlib.Path) -> None:
    tokenizer = ByteLevelBPETokenizer.from_file(str(out / "vocab.json"), str(out / "merges.txt"),
                                                add_prefix_space=False)
    strings = test_strings()
    with open(out / "parity.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for s in strings:
            ids = tokenizer.encode(s, add_special_tokens=False).ids
            back = tokenizer.decode(ids, skip_special_tokens=False)
            assert back == s, (s, ids, back)
            f.write(json.dumps({"text": s, "ids": ids}, ensure_ascii=False) + "\n")
    print(f"parity.jsonl: {len(strings)} strings")
    cross_check_transformers(out, strings)


def cross_check_transformers(out: pathlib.Path, strings: list[str]) -> None:
    """The slow GPT2Tokenizer (Python `regex`) should agree wherever Unicode versions do."""
    try:
        from transformers import GPT2Tokenizer
    except ImportError:
        print("transformers not installed: skipping the GPT2Tokenizer cross-check")
        return
    fast = ByteLevelBPETokenizer.from_file(str(out / "vocab.json"), str(out / "merges.txt"))
    slow = GPT2Tokenizer(str(out / "vocab.json"), str(out / "merges.txt"), unk_token="<unk>",
                         bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    checked = differ = 0
    for s in strings:
        if any(t in s for t in SPECIAL_TOKENS):
            continue  # the slow tokenizer splits special tokens out of text; HF's file load does not
        checked += 1
        a = fast.encode(s, add_special_tokens=False).ids
        b = slow.encode(s, add_special_tokens=False)
        if a != b:
            differ += 1
            if differ <= 5:
                print(f"  GPT2Tokenizer differs on {s!r}")
    print(f"GPT2Tokenizer cross-check: {checked - differ}/{checked} strings agree")


def write_utf8_replace(out: pathlib.Path) -> None:
    rng = random.Random(SEED + 1)
    # Bytes that matter to a UTF-8 decoder: ASCII, every continuation range boundary, every kind of
    # lead byte (including the never-valid C0, C1, F5..FF), plus uniformly random ones.
    interesting = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                   0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF8, 0xFE,
                   0xFF]
    valid = ["é", "€", "😀", "\ud7ff", "\ue000", "\U0010ffff", "a"]
    with open(out / "utf8_replace.txt", "w", encoding="ascii", newline="\n") as f:
        f.write("# INPUT_HEX OUTPUT_HEX: OUTPUT = INPUT.decode('utf-8', 'replace').encode()\n")
        for _ in range(600):
            data = bytearray()
            for _ in range(rng.randint(1, 12)):
                kind = rng.random()
                if kind < 0.5:
                    data.append(rng.choice(interesting))
                elif kind < 0.75:
                    data.append(rng.randrange(256))
                else:  # a valid character, sometimes cut short
                    encoded = rng.choice(valid).encode("utf-8")
                    data += encoded[:rng.randint(1, len(encoded))]
            replaced = bytes(data).decode("utf-8", errors="replace").encode("utf-8")
            f.write(f"{bytes(data).hex()} {replaced.hex()}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "tests/data/tokenizer")
    args = parser.parse_args()
    out: pathlib.Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # save_model writes more than we keep
        train(pathlib.Path(tmp))
        for name in ("vocab.json", "merges.txt"):
            (out / name).write_bytes((pathlib.Path(tmp) / name).read_bytes())
    write_parity(out)
    classify_code_points(out)
    write_utf8_replace(out)
    sizes = {p.name: p.stat().st_size for p in out.iterdir()}
    print("sizes:", sizes)
    assert sizes["vocab.json"] + sizes["merges.txt"] < 100_000
    assert sizes["parity.jsonl"] < 1_100_000


if __name__ == "__main__":
    main()
