#!/usr/bin/env python3
"""Writes the random OPT-125m checkpoint every engine of the peer comparison reads: OPT-125m's
config (12 layers, hidden 768, 50272-row head), transformers' own initialisation under a fixed
seed, saved as published (fp16 safetensors), and a stand-in byte-level vocabulary of 50265
entries so the converters that want a tokenizer find one (the benchmark feeds token ids).

    make_checkpoint.py OUT_DIR
"""
import argparse
import json
import os

import torch
import transformers


def byte_tokens():
    """GPT-2's printable stand-ins for the 256 bytes, in byte order."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
                 + list(range(ord("\xae"), ord("\xff") + 1)))
    shifted, extra = [], 0
    for b in range(256):
        if b in printable:
            shifted.append(chr(b))
        else:
            shifted.append(chr(256 + extra))
            extra += 1
    return shifted


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    config = transformers.OPTConfig(
        vocab_size=50272, hidden_size=768, num_hidden_layers=12, ffn_dim=3072,
        num_attention_heads=12, max_position_embeddings=2048, word_embed_proj_dim=768,
        do_layer_norm_before=True, pad_token_id=1, bos_token_id=2, eos_token_id=2)
    model = transformers.OPTForCausalLM(config).to(torch.float16)
    model.save_pretrained(args.out, safe_serialization=True)
    # OPT's tokenizer has 50265 entries (the head pads to 50272): the specials, the 256 byte
    # tokens every byte-level BPE vocabulary holds, and placeholder names for the rest.
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    vocab.update({token: 4 + i for i, token in enumerate(byte_tokens())})
    vocab.update({f"t{i}": i for i in range(len(vocab), 50265)})
    with open(os.path.join(args.out, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    with open(os.path.join(args.out, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "GPT2Tokenizer", "bos_token": "</s>", "eos_token": "</s>",
                   "unk_token": "</s>", "pad_token": "<pad>", "add_bos_token": True}, f)


if __name__ == "__main__":
    main()
