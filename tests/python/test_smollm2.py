"""offgen's Python API on the real SmolLM2-135M-Instruct (scripts/fetch-model): a mixed call of
text, stop strings, sampling, samples and log-probs, and chat, each equal to the CLI's records
for the same lines; a KV policy through the API as through the CLI."""

import pytest

from offgen import LLM, SamplingParams

from conftest import run_cli, without_times


@pytest.fixture(scope="module")
def llm(smollm2):
    return LLM(model=smollm2, device="cpu", cpu_attention=True, batch_size=4)


def lines_of(prompts, params, url="/v1/completions", key="prompt", chat=False):
    out = []
    for i, (p, sp) in enumerate(zip(prompts, params)):
        body = sp.body(chat=chat)
        if chat and "max_tokens" in body:
            body["max_completion_tokens"] = body.pop("max_tokens")
        out.append({"custom_id": str(i), "method": "POST", "url": url, "body": {key: p, **body}})
    return out


def test_a_mixed_call_equals_the_cli_and_stops_at_stop_strings(llm, smollm2, tmp_path):
    prompts = ["The capital of France is", "List three colours:\n1.",
               "Once upon a time, in a small village by the sea, there lived an old fisherman who",
               "def fibonacci(n):"]
    params = [SamplingParams(temperature=0, max_tokens=12, stop=["."]),
              SamplingParams(temperature=0.7, top_p=0.9, seed=4, max_tokens=20, stop=["\n3."],
                             include_stop_str_in_output=True),
              SamplingParams(n=2, temperature=0.8, seed=9, max_tokens=16, logprobs=3),
              SamplingParams(temperature=0, max_tokens=24, stop_token_ids=[198])]
    ours = llm.generate(prompts, params, use_tqdm=False)
    cli = run_cli("generate", ["--model", smollm2, "--device", "cpu", "--cpu-attention",
                               "--batch-size", "4"], lines_of(prompts, params), tmp_path)
    assert [without_times(o.record) for o in ours] == [without_times(r) for r in cli]
    first = ours[0].outputs[0]
    assert "Paris" in first.text
    if first.finish_reason == "stop":
        assert first.stop_reason == "." and not first.text.endswith(".")
    second = ours[1].outputs[0]
    if second.stop_reason == "\n3.":
        assert second.text.endswith("\n3.")
    assert len(ours[2].outputs) == 2 and all(len(o.logprobs) == len(o.token_ids)
                                             for o in ours[2].outputs)


def test_chat_equals_the_cli(llm, smollm2, tmp_path):
    conversations = [[{"role": "user", "content": "What is the capital of France?"}],
                     [{"role": "system", "content": "You answer in one word."},
                      {"role": "user", "content": "Name a primary colour."}]]
    params = SamplingParams(temperature=0, max_tokens=16)
    ours = llm.chat(conversations, params, use_tqdm=False)
    cli = run_cli("generate", ["--model", smollm2, "--device", "cpu", "--cpu-attention",
                               "--batch-size", "4"],
                  lines_of(conversations, [params] * 2, "/v1/chat/completions", "messages",
                           chat=True), tmp_path)
    assert [without_times(o.record) for o in ours] == [without_times(r) for r in cli]
    assert "Paris" in ours[0].outputs[0].text
    # The rendered prompt is the one chat() ran (its template writes the special tokens).
    for conversation, out in zip(conversations, ours):
        prompt = llm.apply_chat_template(conversation)
        assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
        assert llm.encode(prompt) == out.prompt_token_ids
    assert "<|im_start|>" in llm.chat_template()


def test_a_kv_policy_scores_as_the_cli_does(smollm2, tmp_path):
    text = open("/usr/share/common-licenses/Apache-2.0").read()[:3000]
    llm = LLM(model=smollm2, device="cpu", policy="h2o", kv_budget=0.25, batch_size=2)
    [ours] = llm.score([text], prefill_tokens=64, argmax=True, use_tqdm=False)
    cli = run_cli("score", ["--model", smollm2, "--device", "cpu", "--policy", "h2o",
                            "--kv-budget", "0.25", "--batch-size", "2"], [{"text": text}],
                  tmp_path, extra=["--prefill-tokens", "64", "--argmax"])
    assert ours.record == cli[0]
    [full] = LLM(model=smollm2, device="cpu", batch_size=2).score([text], prefill_tokens=64,
                                                                   use_tqdm=False)
    assert ours.perplexity > full.perplexity  # eviction loses something on a real model
