#!/usr/bin/env python3
"""Runs lm-evaluation-harness's Hugging Face backend (``hf``, OPTForCausalLM in fp32 on the fp16
weights) on the shipped model and the tasks of tests/python_lm_eval/tasks, and writes what the
offgen backend's test compares with (tests/data/golden/lm-eval/expected.json): each task's
metrics and each request's answer (log-likelihood and is_greedy, or the generated text).

Needs lm_eval[hf] (with torch and transformers), in a virtual environment of its own:
    python3 -m venv /tmp/lmv && /tmp/lmv/bin/pip install "lm_eval[hf]==0.4.13"
    /tmp/lmv/bin/python tools/make_lm_eval_golden.py
"""

import json
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "opt-tiny-kjv-docs"
TASKS = ROOT / "tests" / "python_lm_eval" / "tasks"
OUT = ROOT / "tests" / "data" / "golden" / "lm-eval" / "expected.json"
TASK_NAMES = ["offgen_next_verse", "offgen_verse_completion", "offgen_long_context",
              "offgen_documents"]


def answers(samples):
    """Each request's answer by (doc_id, request index): [log-likelihood, is_greedy], a
    rolling log-likelihood, or a generated text."""
    out = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        for i, resp in enumerate(s["resps"]):
            value = resp[0]
            out.append({"doc_id": s["doc_id"], "request": i,
                        "answer": list(value) if isinstance(value, (list, tuple)) else value})
    return out


def main():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.chdir(TASKS)  # the tasks' data_files are relative
    import lm_eval
    from lm_eval.tasks import TaskManager

    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={MODEL},dtype=float32",  # max_length: the default, 1024
        tasks=TASK_NAMES, task_manager=TaskManager(include_path=str(TASKS)), batch_size=8,
        device="cpu", log_samples=True)
    expected = {"tasks": {}}
    for task in TASK_NAMES:
        metrics = {k: v for k, v in results["results"][task].items()
                   if isinstance(v, (int, float)) and "stderr" not in k}
        expected["tasks"][task] = {"metrics": metrics, "answers": answers(results["samples"][task])}
    OUT.write_text(json.dumps(expected, indent=1) + "\n")
    print(json.dumps({t: v["metrics"] for t, v in expected["tasks"].items()}, indent=1))


if __name__ == "__main__":
    main()
