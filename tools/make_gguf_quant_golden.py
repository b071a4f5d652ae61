#!/usr/bin/env python3
"""Golden fixture for a GGUF reader and its dequantization of ggml tensor types.

What it makes (under tests/data/golden/gguf/):

  quants.gguf          A tiny GGUF v3 file written by the gguf package's GGUFWriter
                       (general.architecture "offgen-test", default alignment 32) holding one
                       tensor per type, in this order: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K,
                       Q5_K, Q6_K, Q5_0, Q5_1 (the last two were appended later, after the
                       others, so the earlier tensors' data and expected values did not change),
                       named "t.<type lowercase>" ("t.q4_k"). Each is 2 rows x 512
                       columns: numpy shape [2, 512], row-major, i.e. GGUF dims (ne) [512, 2] --
                       GGUF lists dims innermost first, the reverse of numpy/torch. Blocks run
                       along the 512 contiguous columns, so a row holds 512 / block_elems blocks.
                       Plus metadata of every GGUF value type under "offgen.test.*" (see
                       quants.json "metadata") for the key/value parser.
  quants_expected.bin  The dequantized values of each tensor as little-endian float32, numpy
                       row-major order, concatenated in the index order.
  quants.json          Index: per tensor its name, type, ggml type id, numpy shape, gguf dims,
                       block size in elements and bytes, the tensor's byte size in the GGUF, and
                       offset / count (in float32 elements) in quants_expected.bin; and the
                       metadata key/values written.

Data: F32 / F16 / BF16 / Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 are gguf.quants.quantize of normal(0, 1) data (F32 and
F16 hold it as is / rounded). gguf.quants has no quantizer for the K-quants, so Q4_K / Q5_K / Q6_K
are random raw block bytes: random codes, random 6-bit (Q4_K, Q5_K) or int8 (Q6_K) sub-block
scales, and finite positive fp16 super-block scales (d, dmin in [0.002, 0.05] for Q4_K / Q5_K;
d in [0.001, 0.01] for Q6_K) so values stay within about +-50. The reference for every type is
gguf.quants.dequantize (numpy float32: Q4_K is d*sc*q - dmin*m, computed as (d*sc)*q - (dmin*m)
with each product rounded to float32; an FMA may differ in the last bit).

Needs numpy and gguf (pip install gguf). Deterministic (fixed seed), CPU only, re-runnable:

    python3 tools/make_gguf_quant_golden.py
"""

import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "tests", "data", "golden", "gguf")
SEED = 5150
ROWS, COLS = 2, 512
# Append new types at the end only: each tensor draws from one rng in this order, so inserting a
# type earlier would change every later tensor's data.
TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K", "Q5_0", "Q5_1"]

# One key per GGUF value type (and arrays), for the metadata parser.
METADATA = [
    ("offgen.test.u8", 200, V.UINT8, None),
    ("offgen.test.i8", -100, V.INT8, None),
    ("offgen.test.u16", 60000, V.UINT16, None),
    ("offgen.test.i16", -30000, V.INT16, None),
    ("offgen.test.u32", 4000000000, V.UINT32, None),
    ("offgen.test.i32", -2000000000, V.INT32, None),
    ("offgen.test.f32", 0.15625, V.FLOAT32, None),
    ("offgen.test.bool", True, V.BOOL, None),
    ("offgen.test.string", "héllo, GGUF", V.STRING, None),
    ("offgen.test.u64", 2**40 + 7, V.UINT64, None),
    ("offgen.test.i64", -(2**40) - 7, V.INT64, None),
    ("offgen.test.f64", -2.5e-300, V.FLOAT64, None),
    ("offgen.test.array_i32", [1, -2, 3], V.ARRAY, V.INT32),
    ("offgen.test.array_f32", [0.5, -1.25], V.ARRAY, V.FLOAT32),
    ("offgen.test.array_string", ["a", "", "<|im_end|>"], V.ARRAY, V.STRING),
]


def rand_f16(rng, n, lo, hi):
    return rng.uniform(lo, hi, size=n).astype(np.float16)


def k_quant_blocks(rng, qtype, n_blocks):
    """Random but sane raw bytes for n_blocks super-blocks of a K-quant type."""
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    if qtype in (T.Q4_K, T.Q5_K):
        d = rand_f16(rng, n_blocks, 0.002, 0.05).view(np.uint8).reshape(n_blocks, 2)
        dmin = rand_f16(rng, n_blocks, 0.002, 0.05).view(np.uint8).reshape(n_blocks, 2)
        scales = rng.integers(0, 256, size=(n_blocks, 12), dtype=np.uint8)  # 8 x (6-bit sc, 6-bit m)
        rest = rng.integers(0, 256, size=(n_blocks, type_size - 16), dtype=np.uint8)  # [qh] + qs
        blocks = np.concatenate([d, dmin, scales, rest], axis=1)
    elif qtype == T.Q6_K:
        qlh = rng.integers(0, 256, size=(n_blocks, 128 + 64), dtype=np.uint8)  # ql, qh
        scales = rng.integers(-128, 128, size=(n_blocks, 16)).astype(np.int8).view(np.uint8)
        d = rand_f16(rng, n_blocks, 0.001, 0.01).view(np.uint8).reshape(n_blocks, 2)
        blocks = np.concatenate([qlh, scales, d], axis=1)
    else:
        raise ValueError(qtype)
    assert blocks.shape == (n_blocks, type_size)
    return blocks


def make_tensor(rng, name):
    qtype = T[name]
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    if name in ("Q4_K", "Q5_K", "Q6_K"):
        blocks = k_quant_blocks(rng, qtype, ROWS * COLS // block_elems)
        data = blocks.reshape(ROWS, COLS // block_elems * block_bytes)
        raw_dtype = qtype
    else:
        x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
        data = gguf.quants.quantize(x, qtype)
        raw_dtype = None if name in ("F32", "F16") else qtype
    ref = gguf.quants.dequantize(data, qtype).astype(np.float32)
    assert ref.shape == (ROWS, COLS) and np.isfinite(ref).all(), name
    return data, raw_dtype, ref


def main():
    rng = np.random.default_rng(SEED)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "quants.gguf")
    w = gguf.GGUFWriter(path, "offgen-test")
    w.add_name("offgen quant fixture")
    for key, val, vtype, sub in METADATA:
        w.add_key_value(key, val, vtype, sub)
    refs, index, offset = [], [], 0
    for name in TYPES:
        data, raw_dtype, ref = make_tensor(rng, name)
        tname = "t." + name.lower()
        w.add_tensor(tname, data, raw_dtype=raw_dtype)
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[T[name]]
        index.append({
            "name": tname,
            "type": name,
            "ggml_type": int(T[name]),
            "shape": [ROWS, COLS],
            "gguf_dims": [COLS, ROWS],
            "block_elems": block_elems,
            "block_bytes": block_bytes,
            "nbytes": ROWS * COLS // block_elems * block_bytes,
            "offset": offset,
            "count": ROWS * COLS,
            "max_abs": float(np.abs(ref).max()),
        })
        refs.append(ref)
        offset += ref.size
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    expected = np.concatenate([r.reshape(-1) for r in refs]).astype("<f4")
    expected.tofile(os.path.join(OUT, "quants_expected.bin"))

    # Read back with the gguf package: same types, dims, bytes and dequantized values.
    r = gguf.GGUFReader(path)
    assert [t.name for t in r.tensors] == [e["name"] for e in index]
    for t, e, ref in zip(r.tensors, index, refs):
        assert t.tensor_type.name == e["type"], (t.tensor_type, e)
        assert list(map(int, t.shape)) == e["gguf_dims"], (t.shape, e)
        assert int(t.n_bytes) == e["nbytes"]
        assert np.array_equal(gguf.quants.dequantize(t.data, t.tensor_type).reshape(ROWS, COLS), ref)
        e["data_offset"] = int(t.data_offset)  # absolute offset of the tensor's bytes in the file
    for key, val, vtype, sub in METADATA:
        f = r.fields[key]
        got = f.contents()
        if vtype == V.FLOAT32:
            got = float(np.float32(got))
        assert got == val or (isinstance(val, list) and list(got) == val), (key, got, val)
        assert f.types[0] == vtype and (sub is None or f.types[-1] == sub), (key, f.types)

    meta = [{"key": k, "type": vt.name, "value": v} if sub is None else
            {"key": k, "type": vt.name, "element_type": sub.name, "value": v}
            for k, v, vt, sub in METADATA]
    doc = {
        "gguf": "quants.gguf",
        "expected": "quants_expected.bin",
        "expected_format": "little-endian float32, numpy row-major per tensor, tensors in order",
        "dims_note": "shape is numpy [rows, cols]; gguf_dims is the GGUF header's ne[] "
                     "(innermost first), the reverse",
        "generator": f"gguf {__import__('importlib.metadata').metadata.version('gguf')} "
                     f"GGUFWriter / gguf.quants.dequantize, seed {SEED}",
        "alignment": 32,
        "architecture": "offgen-test",
        "metadata": meta,
        "tensors": index,
    }
    with open(os.path.join(OUT, "quants.json"), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for fn in ("quants.gguf", "quants_expected.bin", "quants.json"):
        print(f"{fn:22s} {os.path.getsize(os.path.join(OUT, fn)):7d} bytes")
    for e in index:
        print(f"  {e['name']:8s} {e['type']:5s} block {e['block_elems']:3d} el / {e['block_bytes']:3d} B"
              f"  {e['nbytes']:5d} B  max|x| {e['max_abs']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
