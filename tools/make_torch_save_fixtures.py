#!/usr/bin/env python3
"""Save the golden checkpoints again the way most Hugging Face OPT checkpoints ship: torch.save.

Reads the safetensors fixtures tools/make_golden.py wrote (tests/data/golden/<name>/) and writes
each one's tensors, unchanged, with torch.save (the zip format, pickle protocol 2, as
save_pretrained(safe_serialization=False) wrote them) into tests/data/golden/<name>-bin/:

  tiny-preln-bin/          one pytorch_model.bin, fp16, "model." names, and lm_head.weight tied:
                           the same tensor as the embedding, so both name one storage.
  tiny-postln-proj-bin/    sharded: pytorch_model-0000k-of-00003.bin listed in
                           pytorch_model.bin.index.json, the same split as the safetensors shards.
  tiny-bf16-noprefix-bin/  one pytorch_model.bin, bf16, names without "model.", and an untied
                           lm_head.weight: a copy of the embedding in a storage of its own.

Each directory gets config.json and the tokenizer files too (not expected.json: the tests read
the expected values from the safetensors fixture of the same name). Before writing, every tensor
is checked to load back (torch.load with weights_only=True) bit for bit equal to the safetensors
one.

Run from anywhere:  python3 tools/make_torch_save_fixtures.py
"""

import json
import os
import shutil
import sys

import torch
from safetensors.torch import load_file

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(REPO, "tests", "data", "golden")
COPIED = ("config.json", "vocab.json", "merges.txt")


def safetensors_tensors(src):
    """Every tensor of a safetensors fixture, and which file holds it."""
    index_path = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            weight_map = json.load(f)["weight_map"]
    else:
        weight_map = {k: "model.safetensors" for k in load_file(os.path.join(src, "model.safetensors"))}
    tensors = {}
    for name in sorted(set(weight_map.values())):
        tensors.update(load_file(os.path.join(src, name)))
    return tensors, weight_map


def write_fixture(name, layout):
    src = os.path.join(GOLDEN, name)
    out = os.path.join(GOLDEN, name + "-bin")
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for f in COPIED:
        shutil.copyfile(os.path.join(src, f), os.path.join(out, f))
    tensors, weight_map = safetensors_tensors(src)

    if layout == "tied":
        state = dict(tensors)
        state["lm_head.weight"] = state["model.decoder.embed_tokens.weight"]
        torch.save(state, os.path.join(out, "pytorch_model.bin"))
        files = {"pytorch_model.bin": state}
    elif layout == "sharded":
        shard_names = sorted(set(weight_map.values()))
        count = len(shard_names)
        rename = {s: "pytorch_model-%05d-of-%05d.bin" % (i + 1, count) for i, s in enumerate(shard_names)}
        files = {rename[s]: {k: tensors[k] for k, v in weight_map.items() if v == s} for s in shard_names}
        for file, state in files.items():
            torch.save(state, os.path.join(out, file))
        index = {
            "metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())},
            "weight_map": {k: rename[v] for k, v in sorted(weight_map.items())},
        }
        with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    elif layout == "untied":
        state = dict(tensors)
        state["lm_head.weight"] = state["decoder.embed_tokens.weight"].clone()
        torch.save(state, os.path.join(out, "pytorch_model.bin"))
        files = {"pytorch_model.bin": state}
    else:
        raise ValueError(layout)

    # Loads back, bit for bit, with torch's own (safe) loader; ties as intended.
    for file, state in files.items():
        loaded = torch.load(os.path.join(out, file), weights_only=True)
        assert set(loaded) == set(state), file
        for k, v in state.items():
            assert loaded[k].dtype == v.dtype and torch.equal(loaded[k], v), (file, k)
    if layout != "sharded":
        loaded = torch.load(os.path.join(out, "pytorch_model.bin"), weights_only=True)
        embed = "model.decoder.embed_tokens.weight" if layout == "tied" else "decoder.embed_tokens.weight"
        same = loaded["lm_head.weight"].untyped_storage().data_ptr() == loaded[embed].untyped_storage().data_ptr()
        assert same == (layout == "tied"), layout
    return out


def main():
    for name, layout in (("tiny-preln", "tied"), ("tiny-postln-proj", "sharded"),
                         ("tiny-bf16-noprefix", "untied")):
        out = write_fixture(name, layout)
        sizes = {f: os.path.getsize(os.path.join(out, f)) for f in sorted(os.listdir(out))}
        print(f"{os.path.relpath(out, REPO)} ({layout}): {sum(sizes.values())} bytes")
        for f, s in sizes.items():
            print(f"  {f:40s} {s:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
