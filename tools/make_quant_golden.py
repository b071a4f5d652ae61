#!/usr/bin/env python3
"""Generate the golden fixture of FlexGen's 4-bit group-wise quantization.

The compress / decompress sequence of FlexGen's TorchCompressedDevice (flexgen/
compression.py, num_bits 4, group_size 64, asymmetric) is run literally on fp16
torch tensors: pad with zeros, view as groups, mn / mx by torch.min / torch.max,
`scale = B / (mx - mn)` with B = 15 a Python int (which torch evaluates as
`(mx - mn).reciprocal() * 15`), `data = data - mn`, `data.mul_(scale)`,
`data.clamp_(0, B).round_().to(torch.uint8)`, pack even << 4 | odd; then
`data.div_(scale)`, `data.add_(mn)`. Each op rounds its result to fp16, as on
FlexGen's GPU path (its CPU path converts to fp32 first; offgen follows the GPU
path). kernels/quantize_args.h states the same recipe; tests/kernels/
quantize_reference_test.cpp checks offgen's kernels against this fixture bit for
bit.

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


def compress(tensor, group_dim):
    """FlexGen's TorchCompressedDevice.compress, fp16 throughout. Returns (data, scale)."""
    group_size = GROUP_SIZE
    shape = tensor.shape
    num_groups = (shape[group_dim] + group_size - 1) // group_size

    # Pad
    new_shape = shape[:group_dim] + (num_groups, group_size) + shape[group_dim + 1:]
    pad_len = (group_size - shape[group_dim] % group_size) % group_size
    if pad_len != 0:
        pad_shape = shape[:group_dim] + (pad_len,) + shape[group_dim + 1:]
        tensor = torch.cat(
            [tensor, torch.zeros(pad_shape, dtype=tensor.dtype, device=tensor.device)],
            dim=group_dim)
    data = tensor.view(new_shape)

    # Quantize
    B = 2 ** NUM_BITS - 1
    mn = torch.min(data, dim=group_dim + 1, keepdim=True)[0]
    mx = torch.max(data, dim=group_dim + 1, keepdim=True)[0]

    scale = B / (mx - mn)
    data = data - mn
    data.mul_(scale)
    # Debian's torch 1.13 has no fp16 clamp or round on the CPU; both are exact (their results
    # are the input, 0, 15 or an integer of at most 4 bits), so fp32 gives the same fp16 bits.
    data = data.float().clamp_(0, B).round_().half()
    # The one departure: NaN (0 * inf of a group of equal values) is code 0, not a cast of NaN.
    data = torch.where(torch.isnan(data), torch.zeros_like(data), data)
    data = data.to(torch.uint8)

    # Pack
    left_indices = (
        tuple(slice(0, x) for x in data.shape[:group_dim + 1]) +
        (slice(0, data.shape[group_dim + 1], 2),))
    right_indices = (
        tuple(slice(0, x) for x in data.shape[:group_dim + 1]) +
        (slice(1, data.shape[group_dim + 1], 2),))
    data = torch.bitwise_or(data[left_indices].bitwise_left_shift(4), data[right_indices])

    # Reshape
    data_shape = shape[:group_dim] + (num_groups * (group_size // 2),) + shape[group_dim + 1:]
    scale_shape = shape[:group_dim] + (num_groups, 2) + shape[group_dim + 1:]
    data = data.view(data_shape)
    scale = torch.cat([scale, mn], dim=group_dim + 1).view(scale_shape)
    return data, scale


def decompress(data, scale, original_shape, group_dim):
    """FlexGen's TorchCompressedDevice.decompress (its GPU branch: an fp16 workspace)."""
    group_size = GROUP_SIZE
    group_size_c = group_size // 2
    shape = data.shape
    num_groups = (shape[group_dim] + group_size_c - 1) // group_size_c

    new_shape = shape[:group_dim] + (num_groups, group_size_c) + shape[group_dim + 1:]
    packed = data.view(new_shape)

    # Unpack
    new_shape = shape[:group_dim] + (num_groups, group_size) + shape[group_dim + 1:]
    data = torch.empty(new_shape, dtype=torch.float16, device=packed.device)
    left_indices = (
        tuple(slice(0, x) for x in data.shape[:group_dim + 1]) +
        (slice(0, data.shape[group_dim + 1], 2),))
    right_indices = (
        tuple(slice(0, x) for x in data.shape[:group_dim + 1]) +
        (slice(1, data.shape[group_dim + 1], 2),))
    data[left_indices] = packed.bitwise_right_shift(4)
    data[right_indices] = packed.bitwise_and(0xF)

    # Dequantize
    scale, mn = scale.split(1, dim=group_dim + 1)
    data.div_(scale)
    data.add_(mn)

    # Unpad
    unpad_len = (group_size - original_shape[group_dim] % group_size) % group_size
    if unpad_len != 0:
        flatten_shape = shape[:group_dim] + (num_groups * group_size,) + shape[group_dim + 1:]
        indices = [slice(0, x) for x in flatten_shape]
        indices[group_dim] = slice(0, flatten_shape[group_dim] - unpad_len)
        data = data.view(flatten_shape)[indices].contiguous()
    return data.view(original_shape)


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
    cases = [
        ("weight", (torch.randn(200, 96) * 0.05).to(torch.float16), 0),
        ("kv", torch.randn(37, 80).to(torch.float16), 1),
        ("edges", edges(), 1),
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {"group_size": GROUP_SIZE, "num_bits": NUM_BITS, "cases": []}
    for name, x, group_dim in cases:
        x = x + 0.0  # no -0
        data, scale = compress(x, group_dim)
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
        entry = {"name": name, "file": name + ".bin", "outer": outer, "dim": shape[group_dim],
                 "inner": inner}
        for key, tensor in arrays:
            raw = tensor.contiguous().numpy().tobytes()
            entry[key] = {"offset": len(blob), "bytes": len(raw)}
            blob += raw
        (OUT / entry["file"]).write_bytes(blob)
        manifest["cases"].append(entry)
        print(f"{name}: {shape} grouped along dim {group_dim}, {len(blob)} bytes")
    (OUT / "cases.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
