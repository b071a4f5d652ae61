"""offgen's Python API on the tiny checkpoint: arguments checked as the CLI checks its flags,
prompts and parameters in every form, results equal to the CLI's records, requests independent
of their batch-mates, errors that keep what ran, Ctrl-C within a step, the GIL released."""

import json
import signal
import threading
import time

import pytest

import offgen
from offgen import LLM, SamplingParams

from conftest import run_cli, without_times


@pytest.fixture(scope="module")
def llm(tiny):
    return LLM(model=tiny, device="cpu", batch_size=4)


def test_an_unknown_argument_is_a_type_error_naming_it(tiny):
    with pytest.raises(TypeError, match="kv_budgt"):
        LLM(model=tiny, kv_budgt=0.2)


def test_a_bad_value_is_a_value_error_in_argument_names(tiny):
    with pytest.raises(ValueError, match="batch_size") as e:
        LLM(model=tiny, batch_size=0)
    assert "--" not in str(e.value)
    with pytest.raises(ValueError, match="device"):
        LLM(model=tiny, device="tpu")


def test_a_policy_without_its_budget_names_both(tiny):
    with pytest.raises(offgen.Error, match="kv_budget"):
        LLM(model=tiny, policy="h2o")


def test_a_missing_model_names_the_path(tmp_path):
    missing = tmp_path / "no-such-checkpoint"
    with pytest.raises(offgen.Error, match="no-such-checkpoint"):
        LLM(model=str(missing))


def test_text_token_ids_and_dict_prompts_give_the_same_tokens(llm):
    greedy = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    ids = llm.encode("In the beginning")
    [by_text] = llm.generate("In the beginning", greedy, use_tqdm=False)
    # A text prompt starts with the model's prefix (OPT's BOS), as the CLI's does.
    assert by_text.prompt_token_ids[-len(ids):] == ids
    [by_ids] = llm.generate([by_text.prompt_token_ids], greedy, use_tqdm=False)
    [by_dict] = llm.generate({"prompt_token_ids": by_text.prompt_token_ids}, greedy,
                             use_tqdm=False)
    assert by_text.prompt == "In the beginning" and by_ids.prompt is None
    assert by_text.outputs[0].token_ids == by_ids.outputs[0].token_ids == \
        by_dict.outputs[0].token_ids
    assert len(by_text.outputs[0].token_ids) == 8
    # The text leaves out special tokens (BOS / EOS 2, pad 1).
    assert by_text.outputs[0].text == llm.decode(
        [t for t in by_text.outputs[0].token_ids if t not in (1, 2)])


def test_a_requests_result_does_not_depend_on_its_batch_mates(llm):
    params = SamplingParams(temperature=0.8, top_p=0.9, seed=7, max_tokens=12)
    [alone] = llm.generate("And the earth was", params, use_tqdm=False)
    mates = ["x", "a longer prompt that takes more of the block", "And the earth was", "the"]
    together = llm.generate(mates, [SamplingParams(max_tokens=3 + i) for i in range(2)] +
                            [params, SamplingParams(max_tokens=20)], use_tqdm=False)
    assert together[2].outputs[0].token_ids == alone.outputs[0].token_ids
    assert together[2].outputs[0].text == alone.outputs[0].text


def test_n_samples_and_logprobs(llm):
    params = SamplingParams(n=3, temperature=1.0, seed=3, max_tokens=10, logprobs=2,
                            ignore_eos=True)
    [out] = llm.generate("God said", params, use_tqdm=False)
    assert [o.index for o in out.outputs] == [0, 1, 2]
    assert len({tuple(o.token_ids) for o in out.outputs}) > 1  # each sample its own stream
    for o in out.outputs:
        assert len(o.logprobs) == len(o.token_ids) == 10
        for token, step in zip(o.token_ids, o.logprobs):
            assert token in step and len(step) >= 2
            ranked = sorted((lp.rank, lp.logprob) for lp in step.values() if lp.rank)
            assert [r for r, _ in ranked] == list(range(1, len(ranked) + 1))
            assert all(a >= b for (_, a), (_, b) in zip(ranked, ranked[1:]))
        assert o.cumulative_logprob == pytest.approx(sum(s[t].logprob
                                                         for t, s in zip(o.token_ids, o.logprobs)))


def test_results_equal_the_clis_records(llm, tiny, tmp_path):
    prompts = ["In the beginning", "And God said, Let there be light", [2, 10, 11, 12], "the"]
    params = [SamplingParams(temperature=0, max_tokens=6),
              SamplingParams(temperature=0.7, top_k=20, seed=11, max_tokens=9, stop=[" the"]),
              SamplingParams(n=2, temperature=1.0, seed=5, max_tokens=5, logprobs=1),
              SamplingParams(temperature=0.9, max_tokens=4, repetition_penalty=1.3)]
    ours = llm.generate(prompts, params, use_tqdm=False)
    lines = [{"custom_id": str(i), "method": "POST", "url": "/v1/completions",
              "body": dict(prompt=p, **sp.body())} for i, (p, sp) in enumerate(zip(prompts, params))]
    cli = run_cli("generate", ["--model", tiny, "--device", "cpu", "--batch-size", "4"], lines,
                  tmp_path)
    assert [without_times(o.record) for o in ours] == [without_times(r) for r in cli]


def test_a_request_that_cannot_run_keeps_the_others(llm):
    too_long = " ".join(["word"] * 200)  # more than the tiny model's 64 positions
    with pytest.raises(offgen.RequestError, match="request 1") as e:
        llm.generate(["In the beginning", too_long, "God"], SamplingParams(max_tokens=4),
                     use_tqdm=False)
    outputs = e.value.outputs
    assert outputs[1].error and not outputs[1].outputs
    assert len(outputs[0].outputs[0].token_ids) >= 1 and len(outputs[2].outputs[0].token_ids) >= 1
    with pytest.raises(ValueError, match="sampling_params has 2 entries for 3 prompts"):
        llm.generate(["a", "b", "c"], [SamplingParams(), SamplingParams()])


def test_a_bad_parameter_gets_the_clis_message(llm):
    with pytest.raises(offgen.RequestError, match="top_p"):
        llm.generate("a", SamplingParams(top_p=1.5), use_tqdm=False)
    with pytest.raises(offgen.RequestError, match="not supported"):
        llm.generate("a", SamplingParams(extra={"best_of": 3}), use_tqdm=False)


def test_score_equals_the_clis(llm, tiny, tmp_path):
    texts = ["In the beginning God created", "And the earth was without form", [2, 5, 6, 7, 8]]
    ours = llm.score(texts, use_tqdm=False)
    assert ours[0].token_logprobs[0] is None and len(ours[0].token_logprobs) == len(ours[0].token_ids)
    assert ours[0].perplexity == pytest.approx(
        __import__("math").exp(-ours[0].sum_logprob / ours[0].num_scored))
    lines = [{"text": t} if isinstance(t, str) else {"token_ids": t} for t in texts]
    cli = run_cli("score", ["--model", tiny, "--device", "cpu", "--batch-size", "4"], lines,
                  tmp_path)
    assert [o.record for o in ours] == cli
    # Teacher-forced decode steps give the same scores as one prefill, to rounding.
    stepped = llm.score(texts, prefill_tokens=2, use_tqdm=False)
    for a, b in zip(ours, stepped):
        assert a.sum_logprob == pytest.approx(b.sum_logprob, abs=1e-2)
    # argmax: the most likely id at each position, as the CLI's --argmax writes it; greedy
    # decoding's first pick after a prompt is the argmax at the position after it.
    with_argmax = llm.score(texts, argmax=True, use_tqdm=False)
    assert [o.argmax_ids for o in ours] == [None] * len(texts)
    cli = run_cli("score", ["--model", tiny, "--device", "cpu", "--batch-size", "4", "--argmax"],
                  lines, tmp_path)
    assert [o.record for o in with_argmax] == cli
    for a, b in zip(ours, with_argmax):
        assert a.token_logprobs == b.token_logprobs
        assert b.argmax_ids[0] is None and len(b.argmax_ids) == len(b.token_ids)
    prompt = with_argmax[2].token_ids[:-1]
    picked = llm.generate({"prompt_token_ids": prompt}, SamplingParams(temperature=0, max_tokens=1),
                          use_tqdm=False)[0].outputs[0].token_ids
    assert picked == [with_argmax[2].argmax_ids[-1]]


def test_placement_is_the_one_asked_for(llm):
    llm.generate("a", SamplingParams(max_tokens=1), use_tqdm=False)
    assert llm.placement["batch_size"] == 4
    assert llm.model_config["num_hidden_layers"] == 2


def test_ctrl_c_raises_keyboard_interrupt_within_a_step_and_the_llm_still_works():
    llm = LLM(model="dummy:opt-125m", device="cpu", batch_size=2)
    long_run = SamplingParams(temperature=0, max_tokens=1500, ignore_eos=True)
    timer = threading.Timer(1.5, lambda: signal.raise_signal(signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        llm.generate([[2, 100, 200, 300]] * 2, long_run, use_tqdm=False)
    assert time.monotonic() - start < 30  # 1,500 steps take minutes here
    [out] = llm.generate([[2, 100, 200, 300]], SamplingParams(temperature=0, max_tokens=3,
                                                             ignore_eos=True), use_tqdm=False)
    assert len(out.outputs[0].token_ids) == 3


def test_the_gil_is_released_while_the_engine_runs():
    llm = LLM(model="dummy:opt-125m", device="cpu", batch_size=2)
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    start = time.monotonic()
    llm.generate([[2, 100, 200]], SamplingParams(temperature=0, max_tokens=60, ignore_eos=True),
                 use_tqdm=False)
    elapsed = time.monotonic() - start
    done.set()
    counter.join()
    # A thread held off by the GIL would tick only between calls; this one ticks throughout.
    assert len(ticks) > 50, (len(ticks), elapsed)


def test_bench_returns_the_rows(tiny):
    llm = LLM(model="dummy:opt-125m", device="cpu")
    rows = llm.bench(batch=[1, 2], prompt_len=[16], gen_len=[4])
    assert len(rows) == 2 and {r["batch"] for r in rows} == {1, 2}
    assert all(r["status"] == "measured" and r["decode_tokens_per_second"] > 0 for r in rows)
