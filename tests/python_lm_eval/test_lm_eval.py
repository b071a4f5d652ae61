"""offgen's lm-evaluation-harness backend (offgen.lm_eval) on the shipped model and the tasks in
tasks/ (local JSONL, no download), against what the harness's Hugging Face backend answered on
the same model and tasks (tests/data/golden/lm-eval/expected.json, tools/make_lm_eval_golden.py):
the same accuracies, each request's log-likelihood within the golden tolerance, the same
generations.

CTest runs this with the virtual environment scripts/fetch-lm-eval makes (lm_eval without torch)
and the build tree's package on PYTHONPATH."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

lm_eval = pytest.importorskip("lm_eval")
from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

import offgen  # noqa: E402
import offgen.lm_eval  # noqa: E402  (registers --model offgen)
from offgen import SamplingParams  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "opt-tiny-kjv-docs"
TASKS = pathlib.Path(__file__).resolve().parent / "tasks"
EXPECTED = json.loads((ROOT / "tests" / "data" / "golden" / "lm-eval" / "expected.json").read_text())
TASK_NAMES = list(EXPECTED["tasks"])
# Per token of what a request scores, as the trained-model golden test allows the cpu device
# against Hugging Face in fp32 (measured there: within 0.0018 on every token); a sum over n tokens
# is allowed n times that.
LOGPROB_TOLERANCE = 0.01


@pytest.fixture(autouse=True)
def in_tasks_folder(monkeypatch):
    monkeypatch.chdir(TASKS)  # the tasks' data_files are relative to it


@pytest.fixture(scope="module")
def lm():
    return offgen.lm_eval.OffgenLM(model=str(MODEL), device="cpu", batch_size="auto")


@pytest.fixture(scope="module")
def results(lm):
    os.chdir(TASKS)
    return lm_eval.simple_evaluate(model=lm, tasks=TASK_NAMES,
                                   task_manager=TaskManager(include_path=str(TASKS)),
                                   log_samples=True)


def answers(samples):
    out = {}
    for s in samples:
        for i, resp in enumerate(s["resps"]):
            value = resp[0]
            out[(s["doc_id"], i)] = (list(value) if isinstance(value, (list, tuple)) else value,
                                     s["arguments"][i])
    return out


def scored_tokens(lm, arguments):
    """How many tokens a request's answer sums over (its continuation, or the whole text)."""
    if len(arguments) == 1:
        return len(lm.tok_encode(arguments[0]))
    context, continuation = arguments[0], arguments[1]
    return len(lm.tok_encode(context + continuation)) - len(lm.tok_encode(context)) + 1


@pytest.mark.parametrize("task", TASK_NAMES)
def test_metrics_equal_the_hugging_face_backend(results, task):
    want = EXPECTED["tasks"][task]["metrics"]
    got = results["results"][task]
    for name, value in want.items():
        if name == "sample_len":
            assert got[name] == value
        elif "perplexity" in name or "bits_per_byte" in name:
            # exp of a mean over ~1100 tokens: within the mean tolerance, relatively.
            assert got[name] == pytest.approx(value, rel=LOGPROB_TOLERANCE), name
        else:
            assert got[name] == value, name  # accuracies and exact matches: equal


@pytest.mark.parametrize("task", TASK_NAMES)
def test_each_answer_equals_the_hugging_face_backend(lm, results, task):
    got = answers(results["samples"][task])
    want = EXPECTED["tasks"][task]["answers"]
    assert len(got) == len(want)
    for item in want:
        value, arguments = got[(item["doc_id"], item["request"])]
        expected = item["answer"]
        where = f"doc {item['doc_id']} request {item['request']}"
        if isinstance(expected, str):
            assert value == expected, where
            continue
        expected_logprob = expected[0] if isinstance(expected, list) else expected
        logprob = value[0] if isinstance(value, list) else value
        n = scored_tokens(lm, arguments)
        assert abs(logprob - expected_logprob) <= LOGPROB_TOLERANCE * n, where
        if isinstance(expected, list):
            assert value[1] == expected[1], f"{where}: is_greedy"


def test_is_greedy_is_true_for_what_greedy_decoding_writes(lm):
    context = (TASKS / "verse_completion.jsonl").read_text().splitlines()[0]
    context_ids = lm.tok_encode(json.loads(context)["context"])
    out = lm.llm.generate({"prompt_token_ids": context_ids},
                          SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True,
                                         logprobs=1),
                          use_tqdm=False)[0].outputs[0]
    greedy = list(out.token_ids)
    changed = greedy[:-1] + [(greedy[-1] + 1) % 8192]
    (lp, is_greedy), (lp_changed, changed_greedy) = lm._loglikelihood_tokens(
        [(None, context_ids, greedy), (None, context_ids, changed)], disable_tqdm=True)
    assert is_greedy and not changed_greedy
    assert lp == pytest.approx(out.cumulative_logprob, abs=LOGPROB_TOLERANCE * len(greedy))
    assert lp_changed < lp


def test_a_string_that_starts_with_bos_text_gets_the_token_once(lm):
    # As Hugging Face's tokenizer reads "</s>" at the start: the special token, not its letters,
    # and no second one before it.
    assert lm.tok_encode("</s>In the beginning") == [2] + lm.llm.encode("In the beginning")
    assert lm.tok_encode("In the beginning") == [2] + lm.llm.encode("In the beginning")
    assert lm.tok_encode("In the beginning", add_special_tokens=False) == \
        lm.llm.encode("In the beginning")


def test_hugging_face_style_model_args_work(tmp_path):
    model = offgen.lm_eval.OffgenLM.create_from_arg_string(
        f"pretrained={MODEL},batch_size=2", {"batch_size": 1, "device": "cpu"})
    assert model.batch_size == 2  # model_args win over the harness's own --batch_size
    assert model.max_length == 1024  # the positions, as the Hugging Face backend's default


def test_a_kv_policy_acts_on_what_is_scored_through_the_cache():
    # A document scored from 32 tokens of prefill through the KV cache: the full cache gives what
    # one prefill gives; keeping only the 64 most recent tokens (local) changes every later score.
    doc = json.loads((TASKS / "documents.jsonl").read_text().splitlines()[0])["text"]
    request = [Instance("loglikelihood_rolling", {}, (doc,), 0)]

    def rolling(**options):
        model = offgen.lm_eval.OffgenLM(model=str(MODEL), device="cpu", batch_size=2, **options)
        return model.loglikelihood_rolling(request, disable_tqdm=True)[0]

    whole = rolling()
    through_cache = rolling(prefill_tokens=32)
    local = rolling(prefill_tokens=32, policy="local", kv_budget=64)
    tokens = len(offgen.lm_eval.OffgenLM(model=str(MODEL), device="cpu").tok_encode(doc))
    assert through_cache == pytest.approx(whole, abs=LOGPROB_TOLERANCE * tokens)
    assert abs(local - whole) > 0.05 * tokens


def smollm2():
    path = ROOT / ".cache" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.skip("SmolLM2-135M-Instruct is not fetched: run scripts/fetch-model")
    return path


def test_apply_chat_template_runs_a_task_through_the_checkpoints_template():
    model = offgen.lm_eval.OffgenLM(model=str(smollm2()), device="cpu", batch_size=8)
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert model.apply_chat_template(history) == model.llm.apply_chat_template(history)
    assert model.apply_chat_template(history, add_generation_prompt=False).endswith("Hi")
    assert "<|im_start|>" in model.chat_template(True)
    got = lm_eval.simple_evaluate(model=model, tasks=["offgen_next_verse"], limit=4,
                                  task_manager=TaskManager(include_path=str(TASKS)),
                                  apply_chat_template=True, log_samples=True)
    [sample] = [s for s in got["samples"]["offgen_next_verse"] if s["doc_id"] == 0]
    assert sample["arguments"][0][0].startswith("<|im_start|>")  # the context, templated


def test_a_model_without_a_chat_template_says_so(lm):
    with pytest.raises(offgen.Error, match="the model has no chat template"):
        lm.apply_chat_template([{"role": "user", "content": "Hi"}])


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="batch_size must be a positive integer or 'auto'"):
        offgen.lm_eval.OffgenLM(model=str(MODEL), batch_size="many")
    with pytest.raises(ValueError, match="max_length must be 1 to 1024"):
        offgen.lm_eval.OffgenLM(model=str(MODEL), device="cpu", max_length=1025)
    with pytest.raises(ValueError, match="model_args need model=DIR"):
        offgen.lm_eval.OffgenLM()
    with pytest.raises(offgen.Error, match="kv_budget must be positive"):
        offgen.lm_eval.OffgenLM(model=str(MODEL), device="cpu", policy="h2o", kv_budget=-1)
    with pytest.raises(TypeError, match="unexpected keyword arguments: no_such_option"):
        offgen.lm_eval.OffgenLM(model=str(MODEL), no_such_option=1)


def test_the_command_line_runs_a_task(tmp_path):
    # As a user runs it: the harness's own command line, offgen registered by the module.
    done = subprocess.run(
        [sys.executable, "-m", "offgen.lm_eval", "--model", "offgen", "--model_args",
         f"model={MODEL},device=cpu", "--tasks", "offgen_next_verse", "--include_path",
         str(TASKS), "--batch_size", "4", "--output_path", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=TASKS, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    want = EXPECTED["tasks"]["offgen_next_verse"]["metrics"]["acc,none"]
    assert "offgen_next_verse" in done.stdout
    written = list((tmp_path / "out").rglob("results_*.json"))
    assert len(written) == 1, done.stdout[-2000:]
    assert json.loads(written[0].read_text())["results"]["offgen_next_verse"]["acc,none"] == want
