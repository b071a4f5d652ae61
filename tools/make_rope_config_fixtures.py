#!/usr/bin/env python3
"""Fixtures for transformers 5's config layout: rotary settings under `rope_parameters`.

transformers 5 writes config.json with one `rope_parameters` object holding rope_type,
rope_theta and the scaling fields (and partial_rotary_factor where the model has one) in place of
transformers 4's top-level `rope_theta` and `rope_scaling`. What it makes:

  tests/data/golden/tiny-llama3-tied-tf5/
      tests/data/golden/tiny-llama3-tied (made by tools/make_llama_golden.py with transformers
      4.44) loaded with transformers 5 and saved again with save_pretrained (one
      model.safetensors, bf16), so config.json has the transformers 5 layout; with the original's
      generation_config.json, vocab.json, merges.txt and expected.json (its "model" renamed). The
      script checks that transformers 5 gives bit-identical logits from the original and the
      re-saved checkpoint, and that they reproduce expected.json (max |logprob diff| printed).

  tests/data/config/rope/<name>.json
      config.json files written by transformers 5 `config.save_pretrained` for tiny configs (no
      weights): llama-default, llama3, linear, dynamic, yarn (LlamaConfig), qwen2 (Qwen2Config),
      mistral (MistralConfig), phi (PhiConfig, partial_rotary_factor 0.5 -- LlamaConfig,
      MistralConfig and Qwen2Config accept no partial rotary: their attention rotates the whole
      head whatever the config says), and llama3-from-tf4 (the tf4-layout config.json of
      tiny-llama3-tied loaded and saved by transformers 5).
      tests/data/config/rope/expected.json: per file, what transformers 5 computes from it
      (the model's RotaryEmbedding module, i.e. ROPE_INIT_FUNCTIONS[rope_type]): rope_type, rope_theta, rotary dim, inv_freq
      (float32 values as floats, in order) and attention_scaling; "dynamic" is its value before any
      sequence exceeds max_position_embeddings.

Needs torch, transformers (5.x) and safetensors. CPU only, deterministic, re-runnable:

    python3 tools/make_rope_config_fixtures.py
"""

import json
import os
import shutil
import sys
import tempfile

import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, PhiConfig,
                          Qwen2Config)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(REPO, "tests", "data", "golden")
SRC = os.path.join(GOLDEN, "tiny-llama3-tied")
DST = os.path.join(GOLDEN, "tiny-llama3-tied-tf5")
ROPE_DIR = os.path.join(REPO, "tests", "data", "config", "rope")
COPIED = ("generation_config.json", "vocab.json", "merges.txt")

assert int(transformers.__version__.split(".")[0]) >= 5, transformers.__version__


def tiny(**kw):
    base = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                bos_token_id=2, eos_token_id=2, pad_token_id=1)
    base.update(kw)
    return base


CONFIGS = {
    "llama-default": lambda: LlamaConfig(**tiny(rope_parameters={"rope_type": "default",
                                                                 "rope_theta": 10000.0})),
    "llama3": lambda: LlamaConfig(**tiny(rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 32})),
    "linear": lambda: LlamaConfig(**tiny(rope_parameters={"rope_type": "linear",
                                                          "rope_theta": 10000.0, "factor": 2.0})),
    "dynamic": lambda: LlamaConfig(**tiny(rope_parameters={"rope_type": "dynamic",
                                                           "rope_theta": 10000.0, "factor": 2.0})),
    "yarn": lambda: LlamaConfig(**tiny(rope_parameters={
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
        "original_max_position_embeddings": 32, "beta_fast": 32.0, "beta_slow": 1.0})),
    "qwen2": lambda: Qwen2Config(**tiny(num_key_value_heads=1, tie_word_embeddings=True,
                                        rope_parameters={"rope_type": "default",
                                                         "rope_theta": 1000000.0})),
    "mistral": lambda: MistralConfig(**tiny(sliding_window=4096,
                                            rope_parameters={"rope_type": "default",
                                                             "rope_theta": 10000.0})),
    "phi": lambda: PhiConfig(**tiny(num_key_value_heads=4, rope_parameters={
        "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})),
}


def rotary_embedding(config):
    """The model's own rotary module, built as the model builds it (inv_freq, attention_scaling)."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    from transformers.models.mistral.modeling_mistral import MistralRotaryEmbedding
    from transformers.models.phi.modeling_phi import PhiRotaryEmbedding
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding
    cls = {"llama": LlamaRotaryEmbedding, "mistral": MistralRotaryEmbedding,
           "phi": PhiRotaryEmbedding, "qwen2": Qwen2RotaryEmbedding}[config.model_type]
    return cls(config)


def rope_facts(config):
    rp = config.rope_parameters
    rot = rotary_embedding(config)
    inv_freq = rot.inv_freq
    if rp["rope_type"] != "default":  # the same function the module called
        ref, scaling = ROPE_INIT_FUNCTIONS[rp["rope_type"]](config, "cpu")
        assert torch.equal(ref.float(), inv_freq.float()) and scaling == rot.attention_scaling
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return {
        "model_type": config.model_type,
        "rope_type": rp["rope_type"],
        "rope_theta": rp["rope_theta"],
        "head_dim": head_dim,
        "rotary_dim": 2 * inv_freq.numel(),
        "inv_freq": [float(x) for x in inv_freq.float()],
        "attention_scaling": float(rot.attention_scaling),
    }


def make_rope_configs():
    shutil.rmtree(ROPE_DIR, ignore_errors=True)
    os.makedirs(ROPE_DIR)
    facts = {}
    made = dict(CONFIGS)
    made["llama3-from-tf4"] = lambda: LlamaConfig.from_pretrained(SRC)
    for name, build in made.items():
        config = build()
        with tempfile.TemporaryDirectory() as tmp:
            config.save_pretrained(tmp)
            shutil.copyfile(os.path.join(tmp, "config.json"), os.path.join(ROPE_DIR, name + ".json"))
        again = type(config).from_pretrained(os.path.join(ROPE_DIR, name + ".json"))
        assert again.rope_parameters == config.rope_parameters, name
        with open(os.path.join(ROPE_DIR, name + ".json")) as f:
            saved = json.load(f)
        assert "rope_parameters" in saved and "rope_scaling" not in saved, name
        facts[name + ".json"] = rope_facts(again)
    with open(os.path.join(ROPE_DIR, "expected.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "configs": facts}, f, indent=1)
        f.write("\n")
    return facts


@torch.no_grad()
def logits_of(model, ids):
    return model(input_ids=torch.tensor([ids])).logits[0].float()


def fp32_eager(path):
    return LlamaForCausalLM.from_pretrained(path, dtype=torch.float32,
                                            attn_implementation="eager").eval()


def make_tf5_checkpoint():
    shutil.rmtree(DST, ignore_errors=True)
    model = LlamaForCausalLM.from_pretrained(SRC, dtype=torch.bfloat16)
    model.save_pretrained(DST, safe_serialization=True)
    for f in COPIED:
        shutil.copyfile(os.path.join(SRC, f), os.path.join(DST, f))
    with open(os.path.join(SRC, "expected.json")) as f:
        expected = json.load(f)
    expected["model"] = os.path.basename(DST)
    expected["copied_from"] = ("tiny-llama3-tied (references from its 'reference' transformers "
                               "version); checked against transformers "
                               f"{transformers.__version__} by tools/make_rope_config_fixtures.py")
    with open(os.path.join(DST, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")

    with open(os.path.join(DST, "config.json")) as f:
        cfg = json.load(f)
    assert "rope_parameters" in cfg and "rope_scaling" not in cfg and "rope_theta" not in cfg, cfg
    # same tensors, same logits from both directories, and the expected values reproduced
    a, b = fp32_eager(SRC), fp32_eager(DST)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    worst, worst_equal = 0.0, True
    for s in expected["score"]:
        la, lb = logits_of(a, s["token_ids"]), logits_of(b, s["token_ids"])
        worst_equal &= torch.equal(la, lb)
        lp = torch.log_softmax(lb, -1)
        for i in range(1, len(s["token_ids"])):
            worst = max(worst, abs(float(lp[i - 1, s["token_ids"][i]]) - s["token_logprobs"][i]))
    assert worst_equal, "transformers 5 logits differ between the original and the re-saved copy"
    assert worst < 1e-4, worst
    for key in ("generate", "generate_eos"):
        gen = expected.get(key)
        if not gen:
            continue
        for p, o in zip(gen["prompts"], gen["outputs"]):
            ids = list(p)
            for t in o:
                nxt = int(logits_of(b, ids)[-1].argmax())
                assert nxt == t, (key, p, o)
                ids.append(nxt)
    return worst


def main():
    facts = make_rope_configs()
    for name, fct in facts.items():
        print(f"{name:22s} {fct['rope_type']:8s} theta {fct['rope_theta']:>9g} rotary_dim "
              f"{fct['rotary_dim']:3d} attention_scaling {fct['attention_scaling']:.6f}")
    worst = make_tf5_checkpoint()
    print(f"{os.path.relpath(DST, os.getcwd())}: {sorted(os.listdir(DST))}")
    print(f"  transformers {transformers.__version__}: logits of original == re-saved; "
          f"max |logprob - expected.json| {worst:.2e}; greedy outputs reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
