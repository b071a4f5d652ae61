#!/usr/bin/env python3
"""Golden reference fixtures for the LLaMA family from Hugging Face transformers.

What it makes (under tests/data/golden/), tiny random checkpoints of each variant offgen runs:

  tiny-llama-gqa/      LlamaForCausalLM: hidden 64, 2 layers, 4 query heads sharing 2 KV heads,
                       SwiGLU 160, untied head, rope_theta 10000, fp16, one model.safetensors.
  tiny-llama3-tied/    LlamaForCausalLM with LLaMA 3.1's rope_scaling (llama3, factor 8, original
                       context 32 so the scaling changes most frequencies), rope_theta 500000,
                       6 heads / 2 KV heads, head tied to the embedding, bf16, sharded.
  tiny-qwen2-mqa/      Qwen2ForCausalLM: q / k / v biases, one KV head (multi-query), tied head,
                       rope_theta 1e6, fp16.
  tiny-mistral-bin/    MistralForCausalLM (sliding_window above max positions), fp16, saved by
                       torch.save as pytorch_model.bin.

Each directory holds config.json (+ generation_config.json), the weights, a copy of the test
tokenizer and expected.json in tools/make_golden.py's format (score, generate, generate_eos):
references in fp32, eager attention, from the stored (rounded) weights; every greedy step has a
top1-top2 logit gap of at least make_golden.MIN_MARGIN. Token ids are OPT-like (BOS = EOS = 2,
PAD = 1) so one test harness serves both families.

Needs torch, transformers (>= 4.43, for llama3 rope scaling) and safetensors. CPU only,
deterministic, re-runnable:

    python3 tools/make_llama_golden.py
"""

import copy
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as g  # noqa: E402  (the shared reference recipe)

FAMILIES = {
    "llama": (LlamaConfig, LlamaForCausalLM),
    "mistral": (MistralConfig, MistralForCausalLM),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM),
}


def common(**kw):
    base = dict(
        vocab_size=1000,
        max_position_embeddings=64,
        bos_token_id=g.BOS,
        eos_token_id=g.EOS,
        pad_token_id=g.PAD,
        hidden_act="silu",
        attention_dropout=0.0,
        rms_norm_eps=1e-6,
    )
    base.update(kw)
    return base


CHECKPOINTS = [
    dict(name="tiny-llama-gqa", family="llama", seed=4001, dtype=torch.float16, layout="single",
         config=common(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, intermediate_size=160, rope_theta=10000.0,
                       tie_word_embeddings=False)),
    dict(name="tiny-llama3-tied", family="llama", seed=4002, dtype=torch.bfloat16,
         layout="sharded",
         config=common(hidden_size=96, num_hidden_layers=2, num_attention_heads=6,
                       num_key_value_heads=2, intermediate_size=128, rope_theta=500000.0,
                       rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                         high_freq_factor=4.0,
                                         original_max_position_embeddings=32),
                       tie_word_embeddings=True, rms_norm_eps=1e-5)),
    dict(name="tiny-qwen2-mqa", family="qwen2", seed=4003, dtype=torch.float16, layout="single",
         config=common(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=1, intermediate_size=96, rope_theta=1000000.0,
                       tie_word_embeddings=True, use_sliding_window=False)),
    dict(name="tiny-mistral-bin", family="mistral", seed=4004, dtype=torch.float16, layout="bin",
         config=common(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                       num_key_value_heads=2, intermediate_size=128, rope_theta=10000.0,
                       sliding_window=4096, tie_word_embeddings=False)),
]


def init_weights(model, seed):
    """Seeded 'peaky' init: big-ish normal weights, norm weights 1+-0.2, biases +-0.05."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if "norm" in name:
                v = 1.0 + (torch.rand(p.shape, generator=gen) * 2 - 1) * 0.2
            elif name.endswith(".bias"):
                v = torch.randn(p.shape, generator=gen) * 0.05
            elif "embed_tokens" in name or name == "lm_head.weight":
                v = torch.randn(p.shape, generator=gen) * 0.5
            else:
                v = torch.randn(p.shape, generator=gen) * 0.2
            p.copy_(v)
    model.tie_weights()


def build(ck):
    config_cls, model_cls = FAMILIES[ck["family"]]
    cfg = config_cls(**ck["config"])
    torch.manual_seed(ck["seed"])
    model = model_cls(cfg)
    init_weights(model, ck["seed"])
    return model.to(ck["dtype"]).eval()


def fp32_reference(model, ck):
    _, model_cls = FAMILIES[ck["family"]]
    cfg = copy.deepcopy(model.config)
    cfg._attn_implementation = "eager"
    ref = model_cls(cfg).float()
    ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    ref.tie_weights()
    return ref.eval()


def save(model, ck, out_dir):
    if ck["layout"] == "bin":
        model.save_pretrained(out_dir, safe_serialization=False)
        assert os.path.exists(os.path.join(out_dir, "pytorch_model.bin"))
    else:
        shard = "100KB" if ck["layout"] == "sharded" else "50MB"
        model.save_pretrained(out_dir, safe_serialization=True, max_shard_size=shard)
        if ck["layout"] == "sharded":
            assert os.path.exists(os.path.join(out_dir, "model.safetensors.index.json"))
    # Transformers reloads what was saved, bit for bit.
    _, model_cls = FAMILIES[ck["family"]]
    again = model_cls.from_pretrained(out_dir, torch_dtype=ck["dtype"])
    for k, v in model.state_dict().items():
        assert torch.equal(again.state_dict()[k], v), k


def make(ck):
    out_dir = os.path.join(g.OUT_ROOT, ck["name"])
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    model = build(ck)
    save(model, ck, out_dir)
    g.copy_tokenizer(out_dir)
    ref = fp32_reference(model, ck)
    rng = np.random.default_rng(ck["seed"])
    expected = {
        "model": ck["name"],
        "seed": ck["seed"],
        "weights_dtype": str(ck["dtype"]).replace("torch.", ""),
        "reference": f"transformers {transformers.__version__} "
                     f"{type(ref).__name__}, fp32, eager attention",
        "score": g.score_refs(ref, rng),
    }
    generate, tries = g.make_generation(ref, rng, eos=None, want_eos_hit=False, max_tries=200)
    assert generate is not None, f"{ck['name']}: no prompt set with margins >= {g.MIN_MARGIN}"
    expected["generate"] = generate
    eos, _ = g.make_generation_eos(ref, rng)
    if eos is not None:
        expected["generate_eos"] = eos
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(f"{ck['name']}: generate after {tries} draws, eos {'yes' if eos else 'no'}")


def main():
    names = sys.argv[1:]
    for ck in CHECKPOINTS:
        if not names or ck["name"] in names:
            make(ck)
    return 0


if __name__ == "__main__":
    sys.exit(main())
