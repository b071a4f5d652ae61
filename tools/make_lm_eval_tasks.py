#!/usr/bin/env python3
"""Writes the data of the lm-evaluation-harness tasks the backend's tests run
(tests/python_lm_eval/tasks/*.jsonl) from the shipped model's held-out texts
(models/opt-tiny-kjv-docs/eval.jsonl), deterministically:

- next_verse.jsonl (multiple_choice): three verses of a held-out book, then the next verse's
  number; the choices are that verse and three verses of other held-out books;
- verse_completion.jsonl (generate_until): the same shape, the answer the next verse's text;
- documents.jsonl (loglikelihood_rolling): four held-out texts whole, each longer than the
  model's 1024 positions, so each is scored in two windows;
- long_context.jsonl (generate_until): three held-out texts but their last line, each longer
  than the positions left after the new tokens, so the context is cut from the left; the answer
  is the last line.

Usage: tools/make_lm_eval_tasks.py
"""

import json
import pathlib
import random
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
EVAL = ROOT / "models" / "opt-tiny-kjv-docs" / "eval.jsonl"
OUT = ROOT / "tests" / "python_lm_eval" / "tasks"
BOOKS = ("Ruth", "Esther", "Jonah", "Galatians", "James")
VERSE = re.compile(r"^(\d+) (.+)$")


def verses(text):
    """(number, text) of each verse line of a book's text, in order (chapters run on)."""
    out = []
    for line in text.split("\n"):
        m = VERSE.match(line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def write(name, rows):
    with open(OUT / name, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def main():
    texts = [json.loads(line)["text"] for line in EVAL.open()]
    books = {t.split("\n", 1)[0]: verses(t) for t in texts if t.split("\n", 1)[0] in BOOKS}
    assert sorted(books) == sorted(BOOKS), sorted(books)
    rng = random.Random(20261204)
    choice_rows = []
    completion_rows = []
    for book in BOOKS:
        lines = books[book]
        others = [v for b in BOOKS if b != book for _, v in books[b]]
        picks = rng.sample(range(3, len(lines)), 6)
        for k, at in enumerate(picks):
            context = "\n".join(f"{n} {v}" for n, v in lines[at - 3:at]) + "\n" + lines[at][0]
            answer = lines[at][1]
            if k < 4:
                wrong = rng.sample(others, 3)
                label = rng.randrange(4)
                choices = wrong[:label] + [answer] + wrong[label:]
                choice_rows.append({"book": book, "context": context, "choices": choices,
                                    "label": label})
            else:
                completion_rows.append({"book": book, "context": context, "answer": answer})
    write("next_verse.jsonl", choice_rows)
    write("verse_completion.jsonl", completion_rows)
    documents = [texts[i] for i in (0, 1, 2, 3)]
    write("documents.jsonl", [{"text": t} for t in documents])
    long_rows = []
    for i in (4, 5, 6):
        head, _, last = texts[i].rstrip("\n").rpartition("\n")
        long_rows.append({"context": head + "\n", "answer": last})
    write("long_context.jsonl", long_rows)


if __name__ == "__main__":
    main()
