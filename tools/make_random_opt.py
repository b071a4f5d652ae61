#!/usr/bin/env python3
"""Writes a small OPT checkpoint with random weights (config.json + model.safetensors, fp16) in
pure Python, for benchmarks at shapes no released model has -- e.g. the 3-layer, hidden-64 model
with OPT's 50272-row head on which sampling is timed against greedy:

    python3 tools/make_random_opt.py OUT_DIR --layers 3 --hidden 64 --vocab 50272

Weights are N(0, 0.02) (layer norms 1 and 0), so the text is noise and the logits nearly flat.
"""
import argparse
import json
import os
import random
import struct


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=50272)
    parser.add_argument("--positions", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    h, f = args.hidden, 4 * args.hidden
    tensors = {}

    def add(name, shape, const=None):
        n = 1
        for s in shape:
            n *= s
        values = [const] * n if const is not None else [rng.gauss(0, 0.02) for _ in range(n)]
        tensors["model." + name] = (shape, struct.pack("<%de" % n, *values))

    add("decoder.embed_tokens.weight", [args.vocab, h])
    add("decoder.embed_positions.weight", [args.positions + 2, h])
    add("decoder.final_layer_norm.weight", [h], 1.0)
    add("decoder.final_layer_norm.bias", [h], 0.0)
    for layer in range(args.layers):
        p = "decoder.layers.%d." % layer
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            add(p + "self_attn." + proj + ".weight", [h, h])
            add(p + "self_attn." + proj + ".bias", [h])
        add(p + "fc1.weight", [f, h])
        add(p + "fc1.bias", [f])
        add(p + "fc2.weight", [h, f])
        add(p + "fc2.bias", [h])
        for norm in ("self_attn_layer_norm", "final_layer_norm"):
            add(p + norm + ".weight", [h], 1.0)
            add(p + norm + ".bias", [h], 0.0)

    header, offset = {}, 0
    for name, (shape, data) in tensors.items():
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "model.safetensors"), "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for _, data in tensors.values():
            out.write(data)
    config = {
        "model_type": "opt", "activation_function": "relu", "hidden_size": h,
        "num_hidden_layers": args.layers, "num_attention_heads": args.heads, "ffn_dim": f,
        "vocab_size": args.vocab, "max_position_embeddings": args.positions,
        "word_embed_proj_dim": h, "do_layer_norm_before": True, "enable_bias": True,
        "layer_norm_elementwise_affine": True, "bos_token_id": 2, "eos_token_id": 2,
        "pad_token_id": 1, "torch_dtype": "float16",
    }
    with open(os.path.join(args.out, "config.json"), "w") as out:
        json.dump(config, out, indent=2)


if __name__ == "__main__":
    main()
