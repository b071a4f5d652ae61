#!/usr/bin/env python3
"""Writes engine/tokenizer/unicode_nfc_data.inc: the Unicode tables of the NFC / NFD normalizers
as Hugging Face `tokenizers` has them.

    python3 tools/make_tokenizer_nfc_table.py            # needs the PyPI package `tokenizers`

`tokenizers` normalizes with the crate unicode-normalization-alignments, whose tables are older
than Python's (Unicode 9-ish against Python 3.11's 14.0): marks added since have combining class
0 there and new decompositions are missing. So the tables are Python's unicodedata restricted to
what `tokenizers` itself does, found by asking it:
  - a decomposition is kept where `tokenizers`' NFD of the code point changes it;
  - a combining class is kept where `tokenizers` reorders the code point around marks of class 1
    (U+0334) and 240 (U+0345);
  - a two-character decomposition composes back (a primary composite) where `tokenizers`' NFC of
    its two characters gives the code point.
Then a Python implementation of NFD / NFC on these tables is checked against `tokenizers` on every
code point alone and on random mark sequences, and the file is written only if all agree. Hangul
syllables are algorithmic (not in the tables), as in the crate.
"""

from __future__ import annotations

import pathlib
import random
import unicodedata

import tokenizers
from tokenizers import normalizers

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "engine/tokenizer/unicode_nfc_data.inc"
HF_NFD = normalizers.NFD()
HF_NFC = normalizers.NFC()
S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
N_COUNT = V_COUNT * T_COUNT
S_COUNT = L_COUNT * N_COUNT


def scalar_values():
    return (cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)


def hf_reorders(c: str) -> bool:
    """Whether `tokenizers` gives `c` a non-zero combining class."""
    return HF_NFD.normalize_str("\u0345" + c) == c + "\u0345" or \
        HF_NFD.normalize_str(c + "\u0334") == "\u0334" + c


def build_tables():
    ccc = {}
    decomposition = {}
    for cp in scalar_values():
        c = chr(cp)
        klass = unicodedata.combining(c)
        if klass and hf_reorders(c):
            ccc[cp] = klass
        if S_BASE <= cp < S_BASE + S_COUNT:
            continue
        fields = unicodedata.decomposition(c).split()
        if fields and not fields[0].startswith("<") and HF_NFD.normalize_str(c) != c:
            parts = [int(f, 16) for f in fields]
            decomposition[cp] = parts
    composes = {cp for cp, parts in decomposition.items()
                if len(parts) == 2 and HF_NFC.normalize_str(chr(parts[0]) + chr(parts[1])) == chr(cp)}
    return ccc, decomposition, composes


class Reference:
    """NFD / NFC on the tables, as engine/tokenizer/unicode_nfc.cpp implements them."""

    def __init__(self, ccc, decomposition, composes):
        self.ccc = ccc
        self.decomposition = decomposition
        self.compose_map = {tuple(decomposition[cp]): cp for cp in composes}

    def decompose(self, cp: int, out: list[int]) -> None:
        if S_BASE <= cp < S_BASE + S_COUNT:
            s = cp - S_BASE
            out.append(L_BASE + s // N_COUNT)
            out.append(V_BASE + (s % N_COUNT) // T_COUNT)
            if s % T_COUNT:
                out.append(T_BASE + s % T_COUNT)
            return
        parts = self.decomposition.get(cp)
        if parts is None:
            out.append(cp)
            return
        for part in parts:
            self.decompose(part, out)

    def nfd(self, text: str) -> list[int]:
        out: list[int] = []
        for c in text:
            self.decompose(ord(c), out)
        # Canonical ordering: a stable sort of each run of non-starters by class.
        i = 0
        while i < len(out):
            if self.ccc.get(out[i], 0) == 0:
                i += 1
                continue
            j = i
            while j < len(out) and self.ccc.get(out[j], 0) != 0:
                j += 1
            out[i:j] = sorted(out[i:j], key=lambda cp: self.ccc[cp])
            i = j
        return out

    def compose_pair(self, a: int, b: int):
        if L_BASE <= a < L_BASE + L_COUNT and V_BASE <= b < V_BASE + V_COUNT:
            return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT
        if S_BASE <= a < S_BASE + S_COUNT and (a - S_BASE) % T_COUNT == 0 and \
                T_BASE < b < T_BASE + T_COUNT:
            return a + (b - T_BASE)
        return self.compose_map.get((a, b))

    def nfc(self, text: str) -> str:
        cps = self.nfd(text)
        out: list[int] = []
        starter = None  # index in out of the last starter
        last_class = -1
        for cp in cps:
            klass = self.ccc.get(cp, 0)
            if starter is not None and (last_class < klass or (last_class == -1 and klass == 0)):
                composite = self.compose_pair(out[starter], cp)
                if composite is not None:
                    out[starter] = composite
                    continue
            if klass == 0:
                starter = len(out)
                last_class = -1
            else:
                last_class = klass
            out.append(cp)
        return "".join(map(chr, out))


def check(reference: Reference) -> None:
    for cp in scalar_values():
        c = chr(cp)
        assert "".join(map(chr, reference.nfd(c))) == HF_NFD.normalize_str(c), hex(cp)
        assert reference.nfc(c) == HF_NFC.normalize_str(c), hex(cp)
    rng = random.Random(7)
    marks = sorted(reference.ccc) + [0x0300, 0x0301, 0x0323, 0x0345, 0x0334, 0x0F72, 0x0F74]
    bases = [0x41, 0x61, 0x45, 0x55, 0x75, 0x3B1, 0x1100, 0x1161, 0x11A8, 0xAC00, 0xAC01,
             0x0915, 0x0F40, 0x212B, 0x00C5, 0x1E0B, 0x0958, 0x0344]
    decomposable = sorted(reference.decomposition)
    for _ in range(200_000):
        text = "".join(chr(rng.choice(rng.choice([marks, bases, decomposable])))
                       for _ in range(rng.randint(1, 6)))
        assert "".join(map(chr, reference.nfd(text))) == HF_NFD.normalize_str(text), text
        assert reference.nfc(text) == HF_NFC.normalize_str(text), ascii(text)


def ranges(ccc: dict[int, int]) -> list[tuple[int, int, int]]:
    out: list[list[int]] = []
    for cp in sorted(ccc):
        if out and out[-1][1] == cp - 1 and out[-1][2] == ccc[cp]:
            out[-1][1] = cp
        else:
            out.append([cp, cp, ccc[cp]])
    return [tuple(r) for r in out]


def write(ccc, decomposition, composes) -> None:
    lines = [
        f"// Generated by tools/make_tokenizer_nfc_table.py from Hugging Face tokenizers "
        f"{tokenizers.__version__}",
        "// and Python's unicodedata; do not edit. Included by unicode_nfc.cpp only.",
        "",
        "// Canonical combining classes other than 0: {first, last, class}.",
        "constexpr CombiningRange kCombiningClasses[] = {",
    ]
    for first, last, klass in ranges(ccc):
        lines.append(f"    {{0x{first:04X}, 0x{last:04X}, {klass}}},")
    lines += [
        "};",
        "",
        "// Canonical decompositions, one level: {code point, first, second (0: none), composes}.",
        "// `composes`: {first, second} composes back to the code point (a primary composite).",
        "constexpr Decomposition kDecompositions[] = {",
    ]
    for cp in sorted(decomposition):
        parts = decomposition[cp] + [0]
        lines.append(f"    {{0x{cp:04X}, 0x{parts[0]:04X}, 0x{parts[1]:04X}, "
                     f"{'true' if cp in composes else 'false'}}},")
    lines.append("};")
    OUT.write_text("\n".join(lines) + "\n", encoding="ascii")
    print(f"{OUT.relative_to(REPO)}: {len(ranges(ccc))} class ranges, "
          f"{len(decomposition)} decompositions ({len(composes)} compose)")


def main() -> None:
    ccc, decomposition, composes = build_tables()
    check(Reference(ccc, decomposition, composes))
    write(ccc, decomposition, composes)


if __name__ == "__main__":
    main()
