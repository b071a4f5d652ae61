"""``LLM``: a model loaded once, answering generate / chat / score calls as ``offgen generate`` and
``offgen score`` answer batch files (the same code, parameters, checks and records)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from . import _offgen
from .outputs import CompletionOutput, Logprob, RequestOutput, ScoreOutput
from .sampling_params import SamplingParams

Error = _offgen.Error
OutOfMemoryError = _offgen.OutOfMemoryError
UsageError = _offgen.UsageError


class RequestError(Error):
    """Some requests of a call could not run (a prompt longer than the model's positions, a stop
    token outside the vocabulary, ...). ``outputs`` holds every request's output, those that ran
    included, so nothing done is lost; the failed ones carry ``error``."""

    def __init__(self, message: str, outputs: list):
        super().__init__(message)
        self.outputs = outputs


# The engine's options, as LLM's keyword arguments; each is the CLI flag of its name with "-"
# for "_" (``kv_budget`` is ``--kv-budget``). docs/python.md says what each does.
_FLAGS = (
    "tokenizer", "device", "gpu_mem", "cpu_mem", "disk", "policy", "kv_budget",
    "compress_weights", "compress_kv", "int8_weights", "prefill_math", "plan", "profile",
    "batch_size", "num_gpu_batches", "weights_gpu", "weights_cpu", "kv_gpu", "cpu_attention",
    "activations_cpu", "dummy", "dummy_seed", "recent_fraction", "sinks", "observation_window",
    "pool_kernel", "pyramid_beta", "page_size", "dense_layers", "speculate_pages",
    "block_seconds",
)
_FLAG_PATTERN = re.compile(r"--([a-z][a-z0-9-]*)")


def _python_names(message: str) -> str:
    """An engine message with LLM's argument names where it names flags."""

    def name(m: "re.Match[str]") -> str:
        word = m.group(1).replace("-", "_")
        if word == "model" or word in _FLAGS:
            return word
        if word == "no_continuous_batching":
            return "continuous_batching=False"
        return m.group(0)

    return _FLAG_PATTERN.sub(name, message)


def _call(f, *args, **kwargs):
    """Calls into the engine; its errors come back naming LLM's arguments, not the CLI's flags."""
    try:
        return f(*args, **kwargs)
    except (UsageError, Error) as e:
        raise type(e)(_python_names(str(e))) from None


def _flag_value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class LLM:
    """A model on one device, its weights, KV cache and activations placed across the gpu tier,
    pinned host memory and disk.

    ``model``: a checkpoint directory (safetensors or torch .bin), a GGUF file, a Hugging Face
    name in the local cache, or ``dummy:NAME`` for dummy weights of a config name (opt-125m ...
    opt-175b, llama-3-8b, ...). Every other argument is the ``offgen generate`` flag of its name
    (``kv_budget=0.2`` is ``--kv-budget 0.2``), checked as the CLI checks it; without ``plan`` or a
    placement argument (``batch_size``, ``num_gpu_batches``, ``weights_gpu``, ``weights_cpu``,
    ``kv_gpu``, ``cpu_attention``, ``activations_cpu``) the planner places each call for its
    longest request. ``seed`` is the sampling seed of requests whose parameters give none (the
    request at position i uses seed + i). ``continuous_batching=False`` runs each block until its
    last request is done.

    Raises ``ValueError`` (``offgen.UsageError``) for a bad argument and ``offgen.Error`` for a
    model or file that cannot be used, with the CLI's message in argument names.
    """

    def __init__(self, model: str, *, seed: int = 0, continuous_batching: bool = True,
                 log_level: Optional[str] = None, **options: Any):
        unknown = sorted(k for k in options if k not in _FLAGS)
        if unknown:
            raise TypeError(f"LLM() got unexpected keyword arguments: {', '.join(unknown)} "
                            f"(offgen's are: model, seed, continuous_batching, log_level, "
                            f"{', '.join(_FLAGS)})")
        if log_level is not None:
            _call(_offgen.set_log_level, log_level)
        flags = ["--model", os.fspath(model)]
        for key in _FLAGS:
            value = options.get(key)
            if value is None or value is False:
                continue
            flag = "--" + key.replace("_", "-")
            if key in ("tokenizer", "disk", "plan", "profile"):
                value = os.fspath(value)
            flags += [flag] if value is True else [flag, _flag_value(value)]
        if not continuous_batching:
            flags.append("--no-continuous-batching")
        self._flags = flags
        self._seed = int(seed)
        self._model = os.fspath(model)
        self._session = _call(_offgen.Session, flags)

    # -- the model ------------------------------------------------------------------------

    @property
    def model_config(self) -> Dict[str, Any]:
        """The sizes of the model (layers, hidden size, heads, vocabulary, positions, BOS / EOS)."""
        return self._session.config

    @property
    def placement(self) -> Optional[Dict[str, Any]]:
        """The placement the last call ran with, as a plan file writes it (None before the first
        call)."""
        text = self._session.placement
        return json.loads(text) if text else None

    @property
    def prompt_prefix(self) -> List[int]:
        """The ids a prompt or text given as a string starts with before its own tokens (OPT's
        ``</s>``, a LLaMA tokenizer's BOS, nothing for Qwen2)."""
        return _call(lambda: self._session.prompt_prefix)

    def apply_chat_template(self, messages: Sequence[Dict[str, Any]],
                            add_generation_prompt: bool = True,
                            chat_template: Optional[str] = None) -> str:
        """The prompt text ``chat()`` would run for ``messages``: the checkpoint's chat template
        (or the template file ``chat_template``) rendered as transformers'
        ``apply_chat_template(tokenize=False)`` renders it; without ``add_generation_prompt``
        the final message is continued instead."""
        return _call(self._session.apply_chat_template, json.dumps(list(messages)),
                     bool(add_generation_prompt), os.fspath(chat_template or ""))

    def chat_template(self, chat_template: Optional[str] = None) -> str:
        """The chat template's text ("" where the checkpoint has none)."""
        return _call(self._session.chat_template, os.fspath(chat_template or ""))

    def encode(self, text: str) -> List[int]:
        """The tokenizer's ids of ``text`` (no special tokens added)."""
        return _call(self._session.encode, text)

    def decode(self, token_ids: Sequence[int]) -> str:
        """The text of ``token_ids`` (special tokens included; the bytes of a character cut in
        two read as U+FFFD)."""
        return _call(self._session.decode, list(token_ids))

    # -- generation -----------------------------------------------------------------------

    def generate(self, prompts: Any, sampling_params: Union[SamplingParams, Sequence[SamplingParams],
                                                            None] = None,
                 use_tqdm: bool = True) -> List[RequestOutput]:
        """Completes each prompt: a string, a list of token ids, a ``{"prompt": ...}`` or
        ``{"prompt_token_ids": [...]}`` dict, or a list of those. ``sampling_params``: one for
        every prompt, or one per prompt (default: ``SamplingParams()``). Returns one
        ``RequestOutput`` per prompt, in order.

        Raises ``offgen.RequestError`` when some prompt could not run (its ``outputs`` holds all
        of them), ``KeyboardInterrupt`` on Ctrl-C (within a step)."""
        items = _prompt_list(prompts)
        params = _params_for(items, sampling_params)
        lines = []
        texts = []
        for i, (item, p) in enumerate(zip(items, params)):
            body = p.body()
            if isinstance(item, dict):
                if "prompt_token_ids" in item:
                    prompt: Any = [int(t) for t in item["prompt_token_ids"]]
                elif "prompt" in item:
                    prompt = item["prompt"]
                else:
                    raise ValueError(f"prompt {i}: a dict prompt gives 'prompt' or "
                                     f"'prompt_token_ids'")
            else:
                prompt = item
            texts.append(prompt if isinstance(prompt, str) else None)
            lines.append(self._line(i, "/v1/completions", dict(prompt=prompt, **body)))
        return self._generate(lines, texts, use_tqdm, chat=False)

    def chat(self, messages: Any, sampling_params: Union[SamplingParams, Sequence[SamplingParams],
                                                         None] = None,
             use_tqdm: bool = True, chat_template: Optional[str] = None,
             add_generation_prompt: bool = True) -> List[RequestOutput]:
        """Answers a conversation (a list of ``{"role", "content"}`` messages) or a list of
        conversations through the checkpoint's chat template (or the template file
        ``chat_template``), as ``/v1/chat/completions`` batch lines are answered."""
        conversations = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        params = _params_for(conversations, sampling_params)
        lines = []
        for i, (conversation, p) in enumerate(zip(conversations, params)):
            body = p.body(chat=True)
            if "max_tokens" in body:
                body["max_completion_tokens"] = body.pop("max_tokens")
            if not add_generation_prompt:
                body["add_generation_prompt"] = False
            lines.append(self._line(i, "/v1/chat/completions",
                                    dict(messages=list(conversation), **body)))
        return self._generate(lines, [None] * len(lines), use_tqdm, chat=True,
                              chat_template=chat_template or "")

    def _line(self, i: int, url: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return {"custom_id": str(i), "method": "POST", "url": url, "body": body}

    def _generate(self, lines, texts, use_tqdm, chat, chat_template=""):
        answers = json.loads(_call(self._session.generate, json.dumps(lines), 16, 1.0, 0, 1.0,
                                   self._seed, chat_template, False, bool(use_tqdm)))
        outputs = [_request_output(str(i), texts[i], a, chat, self) for i, a in enumerate(answers)]
        failed = [o for o in outputs if o.error is not None]
        if failed:
            shown = "; ".join(f"request {o.request_id}: {o.error}" for o in failed[:3])
            more = f" (and {len(failed) - 3} more)" if len(failed) > 3 else ""
            raise RequestError(
                f"{len(failed)} of {len(outputs)} requests could not run: {shown}{more}; "
                f"the exception's outputs hold every request's output", outputs)
        return outputs

    # -- scoring ---------------------------------------------------------------------------

    def score(self, texts: Any, prefill_tokens: int = 0, truncate: Optional[int] = None,
              argmax: bool = False, use_tqdm: bool = True) -> List[ScoreOutput]:
        """Log-probabilities of each text's tokens (``offgen score``): a string (tokenized with
        the model's prefix, BOS for OPT), a list of token ids, or a list of those.
        ``prefill_tokens``: the first N tokens run as one prefill and the rest as decode steps
        through the KV cache (0: all as prefill), so a KV policy's effect shows in the scores.
        ``truncate``: cut longer texts to their first N tokens (default: an error).
        ``argmax``: also the most likely id at each position (``ScoreOutput.argmax_ids``)."""
        if isinstance(texts, str) or (texts and isinstance(texts[0], int)):
            texts = [texts]
        lines = [{"text": t} if isinstance(t, str) else {"token_ids": [int(x) for x in t]}
                 for t in texts]
        answers = json.loads(_call(self._session.score, json.dumps(lines), int(prefill_tokens),
                                   int(truncate or 0), bool(argmax), bool(use_tqdm)))
        outputs = []
        failed = []
        for i, a in enumerate(answers):
            r = a["record"]
            if r.get("error") is not None:
                failed.append(f"text {i}: {r['error']}")
                outputs.append(None)
                continue
            outputs.append(ScoreOutput(token_ids=r["token_ids"], token_logprobs=r["token_logprobs"],
                                       sum_logprob=r["sum_logprob"], num_scored=r["num_scored"],
                                       perplexity=r["perplexity"],
                                       truncated_from=r.get("truncated_from"),
                                       argmax_ids=r.get("argmax_ids"), record=r))
        if failed:
            raise RequestError(f"{len(failed)} of {len(answers)} texts could not be scored: "
                               f"{'; '.join(failed[:3])}; the exception's outputs hold the others "
                               f"(None for those that failed)", outputs)
        return outputs

    # -- benchmarks ------------------------------------------------------------------------

    def bench(self, batch: Iterable[int] = (1, 8, 32), prompt_len: Iterable[int] = (128, 512),
              gen_len: Iterable[int] = (32,), policies: Optional[Iterable[str]] = None,
              kv_budgets: Optional[Iterable[Any]] = None, **options: Any) -> List[Dict[str, Any]]:
        """``offgen bench`` with this LLM's model and options: each row of the sweep (batch size x
        prompt length x generated tokens x policy x budget) as a dict with every field the
        bench's ``--json`` writes; a row that failed (did not fit) has its ``error``, and Ctrl-C
        raises ``KeyboardInterrupt``. The bench loads the model for itself. Further options are
        bench's flags by name (``seed``, ``kv_mem``, ``temperature``, ``top_k``, ``top_p``)."""
        flags = list(self._flags)
        if "--no-continuous-batching" in flags:
            flags.remove("--no-continuous-batching")
        flags += ["--batch", ",".join(str(int(b)) for b in batch),
                  "--prompt-len", ",".join(str(int(p)) for p in prompt_len),
                  "--gen-len", ",".join(str(int(g)) for g in gen_len)]
        if policies is not None or kv_budgets is not None:
            flags = _without(flags, ("--policy", "--kv-budget"))
        if policies is not None:
            flags += ["--policy", ",".join(policies)]
        if kv_budgets is not None:
            flags += ["--kv-budget", ",".join(_flag_value(b) for b in kv_budgets)]
        for key, value in options.items():
            if key not in ("seed", "kv_mem", "temperature", "top_k", "top_p"):
                raise TypeError(f"bench() got an unexpected keyword argument '{key}'")
            flags += ["--" + key.replace("_", "-"), _flag_value(value)]
        with tempfile.TemporaryDirectory(prefix="offgen-bench-") as folder:
            text = _call(_offgen.bench, flags, os.path.join(folder, "rows.json"))
        rows = json.loads(text)
        return rows["rows"] if isinstance(rows, dict) and "rows" in rows else rows


def _without(flags: List[str], names: Sequence[str]) -> List[str]:
    out = []
    skip = False
    for f in flags:
        if skip:
            skip = False
            continue
        if f in names:
            skip = True
            continue
        out.append(f)
    return out


def _prompt_list(prompts: Any) -> List[Any]:
    if isinstance(prompts, (str, dict)):
        return [prompts]
    prompts = list(prompts)
    if prompts and all(isinstance(t, int) for t in prompts):
        return [prompts]  # one prompt of token ids
    return prompts


def _params_for(items: List[Any], sampling_params) -> List[SamplingParams]:
    if sampling_params is None:
        return [SamplingParams()] * len(items)
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params] * len(items)
    params = list(sampling_params)
    if len(params) != len(items):
        raise ValueError(f"sampling_params has {len(params)} entries for {len(items)} prompts: "
                         f"give one, or one per prompt")
    return params


def _request_output(request_id: str, prompt: Optional[str], answer: Dict[str, Any], chat: bool,
                    llm: "LLM") -> RequestOutput:
    record = answer["record"]
    prompt_ids = answer["tokens"][0] if answer["tokens"] else []
    if record.get("error") is not None:
        error = record["error"]
        message = error.get("message") if isinstance(error, dict) else str(error)
        # "line 3: ..." names the batch file's line; here the request is named by its position.
        message = re.sub(r"^line \d+: ", "", message)
        return RequestOutput(request_id, prompt, prompt_ids, [], True, _python_names(message),
                             record)
    outputs = []
    for choice, tops in zip(record["response"]["body"]["choices"], answer["top_logprobs"]):
        text = choice["message"]["content"] if chat else choice["text"]
        logprobs = None
        cumulative = None
        if choice.get("logprobs") is not None:
            picked = _picked_logprobs(choice["logprobs"], chat)
            logprobs = []
            for token, value, step in zip(choice["token_ids"], picked, tops or [[]] * len(picked)):
                entry: Dict[int, Logprob] = {}
                ranks = {tid: r + 1 for r, (tid, _) in enumerate(step)}
                entry[token] = Logprob(value, ranks.get(token), llm.decode([token]))
                for tid, lp in step:
                    if tid not in entry:
                        entry[tid] = Logprob(lp, ranks[tid], llm.decode([tid]))
                logprobs.append(entry)
            cumulative = float(sum(picked))
        outputs.append(CompletionOutput(index=choice["index"], text=text if text is not None else "",
                                        token_ids=choice["token_ids"],
                                        cumulative_logprob=cumulative, logprobs=logprobs,
                                        finish_reason=choice["finish_reason"],
                                        stop_reason=choice.get("stop_reason")))
    return RequestOutput(request_id, prompt, prompt_ids, outputs, True, None, record)


def _picked_logprobs(logprobs: Dict[str, Any], chat: bool) -> List[float]:
    if chat:
        return [step["logprob"] for step in logprobs["content"]]
    return list(logprobs["token_logprobs"])
