#!/usr/bin/env python3
"""Generate the golden fixture of FlexGen's 4-bit group-wise quantization.

FlexGen's recipe (num_bits 4, group_size 64, asymmetric) has two op orders, and
offgen follows each where FlexGen uses it:

  fp16 (the KV cache, quantized on the GPU as it is written): the fp16 torch
    ops of FlexGen's GPU path, each rounding its result to fp16: pad with zeros,
    groups' min and max, `15 / (max - min)` with 15 a Python int (which torch
    evaluates as `(max - min).reciprocal() * 15`), `x - min`, times the scale,
    clamp to [0, 15] and round half to even, pack even << 4 | odd.
  fp32 (weights, quantized once at load by TorchTensor.load_from_np through the
    CPU compressed device): the fp16 tensor is cast to fp32 first and the same
    ops run in fp32; only scale and min are rounded to fp16, when they are
    copied into the fp16 params tensor.

Dequantization is one recipe for both: `q / scale`, then `+ min`, in fp16 (on
the GPU). kernels/quantize_args.h states the same recipes;
tests/kernels/quantize_reference_test.cpp checks offgen's kernels against this
fixture bit for bit.

One departure, which the spec makes too: a group of equal values has d = 0, so
torch computes 0 * inf = NaN there and casts NaN to uint8; those codes are
written as 0 (FlexGen's intent; dequantization then gives exactly mn). Inputs
hold no -0 (the sign of a zero min is the one thing torch.min leaves open).

Cases (tensor, the dim grouped, and offgen's [outer, dim, inner] view):

  weight  [200, 96] normal(0, 0.05), grouped along dim 0 (FlexGen's weights):
          outer 1, dim 200, inner 96 (a 8-row tail group)
  kv      [37, 80] normal(0, 1), grouped along dim 1 (a KV row per token and
          head): outer 37, dim 80, inner 1
  edges   [6, 100] grouped along dim 1: groups whose min is 0 or -8 and max 15
          above it (scale exactly 1) holding k + 0.5 (ties, half to even),
          negative-only groups, constant and all-zero groups, a range of one
          fp16 ulp, and subnormals (r = inf)
  weight_fp32, edges_fp32: the same tensors by the fp32 recipe

Each case in cases.json names its "recipe" (fp16 or fp32).

Written to tests/data/golden/quantize/: cases.json (shapes and where each array
lies) and <case>.bin (x fp16, data bytes, params fp16 [scale, mn] pairs,
y fp16, little-endian, in that order). Deterministic (fixed seed), CPU only,
re-runnable. Needs torch (Debian: apt-get install python3-torch):

    /usr/bin/python3 tools/make_quant_golden.py
"""

import json
import pathlib

import torch

GROUP_SIZE = 64
NUM_BITS = 4
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "golden" / "quantize"


def _to_groups(x, group_dim):
    """x with `group_dim` last, zero-padded to whole groups and split: [..., G, 64]."""
    x = x.movedim(group_dim, -1)
    pad = -x.shape[-1] % GROUP_SIZE
    if pad:
        x = torch.cat([x, x.new_zeros(x.shape[:-1] + (pad,))], dim=-1)
    return x.reshape(x.shape[:-1] + (-1, GROUP_SIZE))


def _from_last(t, group_dim, trailing):
    """Moves the last `trailing` axes of t (laid out [..., rest, last axes]) back to group_dim."""
    lead = t.dim() - trailing
    order = list(range(group_dim)) + list(range(lead, t.dim())) + list(range(group_dim, lead))
    return t.permute(order).contiguous()


def compress(x, group_dim, recipe):
    """The recipe, one tensor op at a time as FlexGen runs it: fp16 ops (its GPU path) or, for
    "fp32", the fp16 tensor cast to fp32 first (its CPU path, which loads weights).

    Returns (codes [..., G * 32 at group_dim, ...], params fp16 [..., G, 2 at group_dim, ...]).
    """
    if recipe == "fp32":
        x = x.float()
    groups = _to_groups(x, group_dim)
    lo = groups.min(dim=-1, keepdim=True).values
    hi = groups.max(dim=-1, keepdim=True).values
    levels = 2 ** NUM_BITS - 1
    scale = levels / (hi - lo)  # a Python number over a tensor: (hi - lo).reciprocal() * levels
    scaled = (groups - lo) * scale
    # Debian's torch 1.13 has no fp16 clamp or round on the CPU; both are exact (their results
    # are the input, 0, 15 or an integer of at most 4 bits), so fp32 gives the same fp16 bits.
    codes = scaled.float().clamp(0, levels).round().half()
    # The one departure: NaN (0 * inf of a group of equal values) is code 0, not a cast of NaN.
    codes = torch.nan_to_num(codes, nan=0.0).to(torch.uint8)
    packed = codes[..., 0::2] << 4 | codes[..., 1::2]  # the even index in the high nibble
    packed = packed.reshape(packed.shape[:-2] + (-1,))
    # [..., G, 2]: scale, then min; fp32 ones are rounded as general_copy writes them into the
    # fp16 params tensor.
    params = torch.cat([scale, lo], dim=-1).half()
    return _from_last(packed, group_dim, 1), _from_last(params, group_dim, 2)


def decompress(codes, params, original_shape, group_dim):
    """Codes back to fp16: q / scale, then + min, each rounded to fp16; padding dropped."""
    codes = codes.movedim(group_dim, -1)
    codes = codes.reshape(codes.shape[:-1] + (-1, GROUP_SIZE // 2))
    q = torch.stack([codes >> 4, codes & 15], dim=-1).reshape(codes.shape[:-1] + (GROUP_SIZE,))
    params = params.movedim(group_dim, -1).movedim(group_dim, -1)  # [..., G, 2]
    y = q.half() / params[..., 0:1]
    y = y + params[..., 1:2]
    y = y.reshape(y.shape[:-2] + (-1,))[..., : original_shape[group_dim]]
    return _from_last(y, group_dim, 1).reshape(original_shape)


def edges():
    """[6, 100] grouped along dim 1: a 64-value group and a 36-value tail group per row."""
    g = torch.Generator().manual_seed(7)
    rows = []

    def ties(base, n):
        # base and base + 15 present (scale = h(h(1/15) * 15) = 1), the rest on k + 0.5 or k.
        k = torch.randint(0, 15, (n,), generator=g).float()
        half = torch.randint(0, 2, (n,), generator=g).float() * 0.5
        v = base + k + half
        v[0], v[1] = base, base + 15
        return v

    rows.append(torch.cat([ties(0, 64), ties(0, 36)]))  # padding 0 == the min
    rows.append(torch.cat([ties(-8, 64), -torch.rand(36, generator=g) * 3 - 0.25]))  # negatives
    rows.append(torch.cat([torch.full((64,), 1.5), torch.full((36,), -0.75)]))  # constants
    rows.append(torch.zeros(100))  # all zero: both groups constant
    one_ulp = torch.tensor([1.0, 1.0009765625]).repeat(50)  # d = 2^-10
    rows.append(one_ulp)
    subnormal = torch.tensor([0, 2 ** -24, 2 ** -23, 3 * 2 ** -24]).repeat(25)  # r = inf
    rows.append(subnormal)
    return torch.stack(rows).to(torch.float16)


def main():
    torch.manual_seed(0)
    weight = (torch.randn(200, 96) * 0.05).to(torch.float16)
    kv = torch.randn(37, 80).to(torch.float16)
    edge_rows = edges()
    cases = [
        ("weight", weight, 0, "fp16"),
        ("kv", kv, 1, "fp16"),
        ("edges", edge_rows, 1, "fp16"),
        ("weight_fp32", weight, 0, "fp32"),
        ("edges_fp32", edge_rows, 1, "fp32"),
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {"group_size": GROUP_SIZE, "num_bits": NUM_BITS, "cases": []}
    packed = {}
    for name, x, group_dim, recipe in cases:
        x = x + 0.0  # no -0
        data, scale = compress(x, group_dim, recipe)
        packed[name] = (data, scale)
        y = decompress(data, scale, x.shape, group_dim)
        assert not torch.isnan(y).any(), name
        shape = list(x.shape)
        outer = 1
        for n in shape[:group_dim]:
            outer *= n
        inner = 1
        for n in shape[group_dim + 1:]:
            inner *= n
        arrays = [("x", x), ("data", data), ("params", scale), ("y", y)]
        blob = b""
        entry = {"name": name, "file": name + ".bin", "recipe": recipe, "outer": outer,
                 "dim": shape[group_dim], "inner": inner}
        for key, tensor in arrays:
            raw = tensor.contiguous().numpy().tobytes()
            entry[key] = {"offset": len(blob), "bytes": len(raw)}
            blob += raw
        (OUT / entry["file"]).write_bytes(blob)
        manifest["cases"].append(entry)
        print(f"{name}: {shape} grouped along dim {group_dim}, {len(blob)} bytes")
    # The two recipes must differ on the weight, or the fp32 cases would test nothing new.
    codes16, params16 = packed["weight"]
    codes32, params32 = packed["weight_fp32"]
    print(f"weight: fp32 vs fp16 recipe: {(codes16 != codes32).float().mean():.2%} of code bytes, "
          f"{(params16 != params32).float().mean():.2%} of params differ")
    assert (codes16 != codes32).any() and (params16 != params32).any()
    (OUT / "cases.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
