#!/usr/bin/env python3
"""Golden fixture for the tokenizer of a GGUF with a SentencePiece ("llama") vocabulary.

What it makes (under tests/data/golden/gguf/):

  spm-tokenizer.gguf  A GGUF v3 file (the gguf package's GGUFWriter) with no tensors, holding the
                      metadata llama.cpp's convert_hf_to_gguf.py writes for a LLaMA-2-style model:
                      general.architecture "llama", general.name, a few llama.* hyper-parameters
                      (transformers builds a config from them before it builds the tokenizer),
                      tokenizer.ggml.model "llama", tokenizer.ggml.pre "default", tokens, scores,
                      token_type, bos / eos / unknown token ids, add_bos_token true,
                      add_eos_token false. The vocabulary is a small SentencePiece BPE model trained
                      here as LLaMA's was configured (byte_fallback, split_digits, identity
                      normalization, extra whitespace kept, <unk>=0 <s>=1 </s>=2, <0x00>..<0xFF> at
                      3..258), converted as llama.cpp's _create_vocab_sentencepiece does: piece,
                      score, and type NORMAL=1 / UNKNOWN=2 / CONTROL=3 / BYTE=6 from the
                      SentencePiece model; then one token from an added_tokens.json, "<think>" at
                      the next id, score -1000, USER_DEFINED=4 (as llama.cpp writes an added token
                      that is neither special nor looks special).
  spm-parity.jsonl    One JSON object per line for ~300 strings: {"text", "ids" (encode with
                      add_special_tokens=False), "with_special" (add_special_tokens=True),
                      "decoded" (decode(ids), skip_special_tokens=False)} from transformers'
                      AutoTokenizer.from_pretrained(dir, gguf_file="spm-tokenizer.gguf"). The
                      strings: English, leading / trailing / repeated spaces, newlines, tabs,
                      digits and numbers, punctuation, accented letters, CJK and emoji (byte
                      fallback), the control and added token texts inside text, the empty string.

The script prints how many strings SentencePiece itself encodes differently from transformers
(informational: transformers is the reference offgen matches, not SentencePiece).

Needs sentencepiece, gguf, transformers (5.x, with tokenizers) and numpy; no network. The
fixtures were made with sentencepiece 0.2.3, gguf 0.19.0, transformers 5.24.0, tokenizers 0.23.3.
Deterministic (fixed corpus built here, one training thread, no sampling), CPU only, re-runnable:

    python3 tools/make_gguf_spm_golden.py
"""

import importlib.metadata
import json
import os
import random
import sys
import tempfile

import gguf
import sentencepiece as spm

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "tests", "data", "golden", "gguf")
GGUF_NAME = "spm-tokenizer.gguf"
VOCAB_SIZE = 800
SEED = 2024
USER_DEFINED = "<think>"

# Hand-written training text (public domain by its authors here), plus generated sentences below.
PARAGRAPHS = """\
The quick brown fox jumps over the lazy dog. A small language model reads text one token at a time,
and every token is a piece of a word, a whole word, or a single byte when nothing else fits.
Tokenizers split text into pieces; the pieces are numbers to the model, and the model predicts the
next number. When the text is long, the cache holds the keys and values of every earlier token.
In the morning the river was quiet, and the boats waited at the harbour for the wind to change.
She said: "It's not the answer, it's the question that matters." He didn't agree -- not at first.
The library opens at 9:30 and closes at 17:45; on Sundays it is closed. Call 555-0123 for details.
Prices rose by 3.5% in 2023, from $1,299.99 to $1,345.49, and again by 0.75% in the next quarter.
Coordinates: 48.8566 N, 2.3522 E. Version 1.2.3 was released on 2024-01-15 at 08:00 UTC.
Functions return values; classes hold state. def main(): return 0 -- if x == 1: print("one")
for i in range(10): total += i * 2  # a comment about the loop, with (parentheses) and [brackets]
{"key": "value", "list": [1, 2, 3], "nested": {"a": true, "b": null}}
Résumé, café, naïve, façade, jalapeño, crème brûlée, São Paulo, Zürich, Ærøskøbing, Łódź.
Le café est très bon, mais la crème brûlée est meilleure. Über den Wolken muss die Freiheit
wohl grenzenlos sein. El niño comió una manzana en el jardín. A menina está à janela.
Numbers in words: one, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve.
Hello, world! Hello again, world. Goodbye, cruel world... Is anyone there? Yes! No? Maybe.
    Indented lines keep their spaces, and tabs\tseparate\tcolumns\tin\ttables.
Lists:
- first item
- second item
* third item, with emphasis
1. numbered
2. numbered again
Email: someone@example.com, web: https://example.org/path?query=1&other=two#section
"""

SUBJECTS = ["the model", "a reader", "the engine", "my friend", "our team", "the cache",
            "every token", "the teacher", "a student", "the server", "this program", "the city"]
VERBS = ["reads", "writes", "computes", "predicts", "returns", "loads", "stores", "finds",
         "builds", "checks", "prints", "sends", "measures", "compares", "decodes", "encodes"]
OBJECTS = ["the next word", "a long sentence", "many numbers", "the weights", "its answer",
           "the input text", "a short story", "the results", "each layer", "the whole file",
           "some bytes", "the prompt", "ten thousand lines", "the first page"]
TAILS = ["quickly", "slowly", "again", "today", "in the evening", "without errors", "on time",
         "before lunch", "after the test", "with care", "twice", "at night"]


def corpus():
    rng = random.Random(SEED)
    lines = PARAGRAPHS.splitlines()
    for _ in range(1500):
        s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}"
        if rng.random() < 0.3:
            s += f", {rng.randint(0, 99999)} times"
        if rng.random() < 0.2:
            s += f" ({rng.randint(1, 12)}/{rng.randint(1, 28)}/{rng.randint(1990, 2030)})"
        s = s[0].upper() + s[1:] + rng.choice([".", ".", ".", "!", "?", ";", ":"])
        lines.append(s)
    return "\n".join(lines * 2) + "\n"


def train(tmp):
    text_path = os.path.join(tmp, "corpus.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write(corpus())
    prefix = os.path.join(tmp, "spm")
    # LLaMA 2's trainer_spec, scaled down (model_type BPE, byte_fallback, split_digits, identity
    # normalization, extra whitespace kept, whitespace-only pieces allowed).
    spm.SentencePieceTrainer.train(
        input=text_path, model_prefix=prefix, model_type="bpe", vocab_size=VOCAB_SIZE,
        byte_fallback=True, split_digits=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
        add_dummy_prefix=True, split_by_unicode_script=True, split_by_whitespace=True,
        max_sentencepiece_length=16, character_coverage=0.9995,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, unk_piece="<unk>", bos_piece="<s>",
        eos_piece="</s>", num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
        minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def vocab_from_spm(sp):
    """llama.cpp's _create_vocab_sentencepiece, plus one added_tokens.json entry."""
    T = gguf.TokenType
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        t = T.NORMAL
        if sp.IsUnknown(i):
            t = T.UNKNOWN
        elif sp.IsControl(i):
            t = T.CONTROL
        elif sp.IsUnused(i):
            t = T.UNUSED
        elif sp.IsByte(i):
            t = T.BYTE
        tokens.append(sp.IdToPiece(i))
        scores.append(sp.GetScore(i))
        types.append(int(t))
    tokens.append(USER_DEFINED)
    scores.append(-1000.0)
    types.append(int(T.USER_DEFINED))
    return tokens, scores, types


def write_gguf(path, tokens, scores, types):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("offgen spm tokenizer fixture")
    # A tiny LLaMA's hyper-parameters: transformers' AutoTokenizer builds a config first.
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_rope_dimension_count(16)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_strings():
    s = [
        "", " ", "  ", "   ", "\n", "\n\n", "\t", " \t ", "a", "A", " a", "a ", " a ", "  a",
        "a  b", "a   b", "a    b", "a\tb", "a\nb", "a\n\nb", "a \n b", "\n a", "a\n", "a \n",
        "Hello", "Hello world", "Hello world!", " Hello world", "Hello world ", "  Hello  world  ",
        "hello\nworld", "hello\r\nworld", "hello\rworld", "\thello", "hello\t", "Hello,world",
        "The quick brown fox jumps over the lazy dog.",
        "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG.",
        "the model reads the next word quickly.",
        "Tokenizers split text into pieces; the pieces are numbers to the model.",
        "She said: \"It's not the answer, it's the question that matters.\"",
        "He didn't agree -- not at first.", "I'm sure you'll see we've done it; they'd know.",
        "0", "1", "12", "123", "1234", "12345", "3.14159", "-42", "+7", "1,000,000", "1e-5",
        "2024-01-15", "08:00", "9:30am", "$1,299.99", "50%", "0.75%", "v1.2.3", "555-0123",
        "Call 555-0123 at 9:30.", "In 2023 prices rose by 3.5%.", "a1b2c3", "x=1+2*3/4-5",
        "1 2 3 4 5", "1  2", " 7 ", "007", "3rd", "1st place", "20th century", "10 000",
        "!", "?", ".", ",", "...", "!!!", "?!", "()", "[]", "{}", "<>", "\"\"", "''", "``",
        "#", "@", "&", "*", "^", "~", "|", "\\", "/", "_", "__init__", "a_b_c", "--", "---",
        "----------", "==========", "#include <stdio.h>", "int main(void) { return 0; }",
        "def f(x):\n    return x * 2\n", "    indented", "\tindented", "if x == 1:\n\tprint(x)",
        "{\"key\": \"value\", \"n\": [1, 2, 3]}", "https://example.org/path?q=1&r=two#s",
        "someone@example.com", "C:\\Users\\name\\file.txt", "~/.bashrc", "a->b", "a=>b",
        "café", "Café", "résumé", "naïve", "façade", "jalapeño", "crème brûlée", "São Paulo",
        "Zürich", "Ærøskøbing", "Łódź", "Über den Wolken", "El niño comió una manzana.",
        "A menina está à janela.", "Ça va?", "Ελληνικά", "Привет, мир!", "Straße", "ﬁ ligature",
        "e\u0301", "\u00e9", "Å", "Å", "ångström", "ø", "ß", "İstanbul", "Øresund",
        "日本語", "日本語のテキスト", "中文", "你好，世界！", "한국어", "こんにちは", "漢字 and kanji",
        "東京 2024", "Ｆｕｌｌｗｉｄｔｈ", "ｶﾀｶﾅ", "😀", "👍🏽", "🇫🇷", "👨‍👩‍👧", "I ❤ tokens",
        "emoji 😀 in text", "😀😀😀", "✓ done", "→ arrow", "∑ x²", "½ + ¼", "°C", "€100",
        "£5", "¥500", "©2024", "™", "…", "—", "–", "“quotes”", "‘single’", "«guillemets»",
        "\u00a0non-breaking", "zero\u200bwidth", "\u3000ideographic space", "tab\u000bvt",
        "\x00", "\x01", "\x7f", "\u0080", "\ufeffbom", "\ud7ff", "\ue000", "\U0010ffff",
        "<s>", "</s>", "<unk>", "<s>Hello", "Hello</s>", "<s> Hello", "Hello <s> world",
        "<s></s>", "</s><s>", "a<s>b", "a </s> b", "<s>\n", "  <s>", "<S>", "< s >", "<s",
        "s>", "<<s>>", "<think>", "<think>why</think>", "a<think>b", " <think> ", "think>",
        "<0x41>", "<0xE6>", "▁", "▁▁", "a▁b", "▁hello", "[INST] hi [/INST]", "<|im_start|>",
    ]
    # Generated sentences in the training distribution and outside it.
    rng = random.Random(SEED + 1)
    for _ in range(40):
        s.append(f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} "
                 f"{rng.choice(OBJECTS)} {rng.choice(TAILS)}, {rng.randint(0, 10**6)} times.")
    alphabet = "abcdefghijklmnopqrstuvwxyz ABCXYZ 0123456789 .,;:!?'\"-()\n\t éüñ日😀"
    for n in range(30):
        s.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))
    words = "the a of and to in is it that was for on are with as his they at be this".split()
    for n in range(20):
        sep = rng.choice([" ", "  ", "\n", " \n", "\t", ", "])
        s.append(sep.join(rng.choice(words) for _ in range(rng.randint(2, 12))))
    out = []
    for t in s:
        if t not in out:
            out.append(t)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        sp = train(tmp)
        tokens, scores, types = vocab_from_spm(sp)
        path = os.path.join(OUT, GGUF_NAME)
        write_gguf(path, tokens, scores, types)
        tok = AutoTokenizer.from_pretrained(OUT, gguf_file=GGUF_NAME)

        # Read back with the gguf package.
        r = gguf.GGUFReader(path)
        assert [str(bytes(r.fields["tokenizer.ggml.tokens"].parts[i]), "utf-8")
                for i in r.fields["tokenizer.ggml.tokens"].data] == tokens
        assert len(r.tensors) == 0

        strings = test_strings()
        disagree = []
        with open(os.path.join(OUT, "spm-parity.jsonl"), "w", encoding="utf-8") as f:
            for text in strings:
                ids = tok.encode(text, add_special_tokens=False)
                with_special = tok.encode(text, add_special_tokens=True)
                decoded = tok.decode(ids)
                f.write(json.dumps({"text": text, "ids": ids, "with_special": with_special,
                                    "decoded": decoded}, ensure_ascii=False) + "\n")
                if sp.encode(text) != ids:
                    disagree.append(text)

    backend = json.loads(tok.backend_tokenizer.to_str())
    print(f"{GGUF_NAME}: {os.path.getsize(path)} bytes, {len(tokens)} tokens "
          f"(sentencepiece {spm.__version__}, gguf {importlib.metadata.version('gguf')}, "
          f"transformers {importlib.metadata.version('transformers')}, "
          f"tokenizers {importlib.metadata.version('tokenizers')})")
    print(f"spm-parity.jsonl: {len(strings)} strings")
    print(f"tokenizer class {type(tok).__name__}; normalizer {backend['normalizer']}; "
          f"pre_tokenizer {backend['pre_tokenizer']}")
    print(f"sentencepiece's own encode differs from transformers on {len(disagree)} strings "
          f"(informational): {[t for t in disagree[:12]]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
