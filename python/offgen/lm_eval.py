"""offgen as a model of EleutherAI's lm-evaluation-harness (``pip install lm_eval``): the class
``OffgenLM``, registered under the name ``offgen`` when this module is imported.

lm-evaluation-harness finds models in its own registry only, so run it through this module, which
registers offgen and then runs the harness's command line with the arguments given::

    python -m offgen.lm_eval --model offgen \\
        --model_args model=DIR,policy=h2o,kv_budget=0.2 --tasks hellaswag --batch_size auto

or, from Python, ``import offgen.lm_eval`` before ``lm_eval.simple_evaluate(model="offgen", ...)``
(or pass ``OffgenLM(...)`` itself as the model).

Every request goes through the engine as lm-evaluation-harness's Hugging Face backend (``hf``)
would run it, so the two agree on the same checkpoint: the same tokens (the tokenizer's prefix,
``</s>`` for OPT, unless ``add_bos_token`` says otherwise), the same context truncation, the same
rolling windows, the same stop handling. The requests of a call are scored (or generated) in one
engine job, longest first, so the engine packs them into its blocks; ``batch_size`` is the
engine's ``batch_size`` (``auto``: the planner's, the largest that fits its memory budgets).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple

import lm_eval.models  # noqa: F401  (the harness's own models, before offgen joins the registry)
from lm_eval import utils as harness_utils
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import (handle_stop_sequences, normalize_gen_kwargs,
                                  postprocess_generated_text)

from .llm import LLM, Error
from .sampling_params import SamplingParams

# lm-evaluation-harness's default for generate_until (its Hugging Face backend's).
DEFAULT_MAX_GEN_TOKS = 256


def _batch_size(value: Any) -> Optional[int]:
    """lm-evaluation-harness's batch size (an int, "8", "auto", "auto:N") as the engine's: None
    lets the planner choose the largest that fits."""
    if value is None:
        return None
    text = str(value)
    if text.startswith("auto"):
        return None
    size = int(text) if text.isdigit() else 0
    if size < 1:
        raise ValueError(f"batch_size must be a positive integer or 'auto' (got {value!r})")
    return size


def _device(value: Optional[str]) -> Optional[str]:
    """A device as offgen names it (auto, cuda, cpu); cuda:0 is cuda."""
    if value is None:
        return None
    name = str(value)
    if name == "cuda:0":
        return "cuda"
    if name.startswith("cuda:"):
        raise ValueError(f"device {name}: offgen runs on one GPU, cuda (cuda:0); set "
                         f"CUDA_VISIBLE_DEVICES to choose another")
    return name


def _harness_device(value: Optional[str]) -> Optional[str]:
    """The harness's --device, which it always passes (cuda:0 unless told otherwise): cpu is the
    cpu device; cuda and cuda:0 are offgen's auto (the GPU where there is one, else the CPU), so
    a run on a machine without one still runs. model_args' device=cuda insists on the GPU."""
    if value is not None and str(value) in ("cuda", "cuda:0"):
        logging.getLogger("offgen").info(
            "the harness's --device %s is offgen's auto (the GPU where there is one, else the "
            "CPU); model_args device=cuda insists on the GPU", value)
        return "auto"
    return _device(value)


def _longest_first(items: List[Any], length: Any, run: Any) -> List[Any]:
    """run(items longest first) — as the Hugging Face backend orders them, so a request too long
    for the memory budget fails at once, not after an hour — answered in the items' own order."""
    order = sorted(range(len(items)), key=lambda i: -length(items[i]))
    answers = run([items[i] for i in order])
    result: List[Any] = [None] * len(items)
    for i, answer in zip(order, answers):
        result[i] = answer
    return result


class OffgenLM(TemplateLM):
    """An offgen ``LLM`` answering lm-evaluation-harness's three request types.

    ``model``: what ``offgen.LLM`` takes (a checkpoint directory, a GGUF file, ...). Every
    ``LLM`` option (``policy``, ``kv_budget``, ``gpu_mem``, ``compress_kv``, ...) is accepted by
    name. Further:

    - ``batch_size``: the engine's batch size, or ``auto`` for the planner's;
    - ``max_length``: the most tokens a request is scored or generated with (default: the
      model's positions, as the Hugging Face backend's; a scored window's max_length + 1 tokens
      fit, its last token being only a target);
    - ``max_gen_toks``: generate_until's default of new tokens (256);
    - ``add_bos_token``: True / False to prepend the tokenizer's prefix or not (default: as the
      checkpoint's tokenizer does, as the Hugging Face backend does);
    - ``prefix_token_id``: the token an empty context is conditioned on (default: BOS, else EOS);
    - ``prefill_tokens``: score each request's first N tokens as one prefill and the rest as
      teacher-forced decode steps through the KV cache, so that the KV policy (``h2o`` ...) acts
      on what is scored (default 0: all as one prefill, where no policy evicts);
    - ``seed``: the sampling seed of generate_until requests that sample.
    """

    def __init__(self, model: Optional[str] = None, batch_size: Any = None,
                 max_batch_size: Any = None,
                 device: Optional[str] = None, max_length: Optional[int] = None,
                 max_gen_toks: int = DEFAULT_MAX_GEN_TOKS, add_bos_token: Optional[bool] = None,
                 prefix_token_id: Optional[int] = None, prefill_tokens: int = 0,
                 seed: int = 0, pretrained: Optional[str] = None, **options: Any):
        super().__init__()
        if model is None:
            model = pretrained  # the Hugging Face backend's name for it
        elif pretrained is not None:
            raise ValueError("give model= or pretrained= (the same thing), not both")
        if model is None:
            raise ValueError("model_args need model=DIR (a checkpoint directory, a GGUF file, "
                             "...; pretrained= is taken too)")
        del max_batch_size  # the planner bounds the batch by memory itself
        engine_batch = _batch_size(batch_size)
        if engine_batch is not None:
            options["batch_size"] = engine_batch
        engine_device = _device(device)
        if engine_device is not None:
            options.setdefault("device", engine_device)
        self.llm = LLM(model, seed=int(seed), **options)
        self._model = str(model)
        config = self.llm.model_config
        self._positions = int(config["max_position_embeddings"])
        self._eos = int(config["eos_token_id"])
        self._bos = config.get("bos_token_id")
        if max_length is None:
            max_length = self._positions
        max_length = int(max_length)
        if not 1 <= max_length <= self._positions:
            raise ValueError(f"max_length must be 1 to {self._positions}, the model's positions "
                             f"(got {max_length})")
        self._max_length = max_length
        self._max_gen_toks = int(max_gen_toks)
        if self._max_gen_toks < 1:
            raise ValueError(f"max_gen_toks must be >= 1 (got {max_gen_toks})")
        self._add_bos = add_bos_token
        self._custom_prefix = None if prefix_token_id is None else int(prefix_token_id)
        self._prefill_tokens = int(prefill_tokens)
        self._prompt_prefix = list(self.llm.prompt_prefix)
        # The special tokens' text, read once: tok_encode looks for the prefix's on every call.
        self._prefix_text = self.tok_decode([self.prefix_token_id])
        self._eos_text = self.tok_decode([self._eos])
        self.batch_size_per_gpu = engine_batch if engine_batch is not None else "auto"

    @classmethod
    def create_from_arg_string(cls, arg_string: str,
                               additional_config: Optional[Dict[str, Any]] = None) -> "OffgenLM":
        return cls.create_from_arg_obj(harness_utils.simple_parse_args_string(arg_string),
                                       additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: Dict[str, Any],
                            additional_config: Optional[Dict[str, Any]] = None) -> "OffgenLM":
        """--model_args, with the harness's own --batch_size and --device where they do not say
        (the harness passes both always, so naming one in both places is no error)."""
        args = dict(arg_dict)
        extra = {k: v for k, v in (additional_config or {}).items() if v is not None}
        if "device" not in args and "device" in extra:
            args["device"] = _harness_device(extra["device"])
        extra.pop("device", None)
        for key, value in extra.items():
            args.setdefault(key, value)
        return cls(**args)

    # -- what the harness asks of a model --------------------------------------------------

    @property
    def eot_token_id(self) -> int:
        return self._eos

    @property
    def prefix_token_id(self) -> int:
        if self._custom_prefix is not None:
            return self._custom_prefix
        return int(self._bos) if self._bos is not None else self._eos

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def max_gen_toks(self) -> int:
        return self._max_gen_toks

    @property
    def batch_size(self) -> Any:
        return self.batch_size_per_gpu

    @property
    def tokenizer_name(self) -> str:
        # The harness's cache keys and chat templates name the tokenizer; this is the checkpoint.
        return self._model.replace("/", "__")

    def tok_encode(self, string: str, add_special_tokens: Optional[bool] = None,
                   left_truncate_len: Optional[int] = None, **kwargs: Any) -> List[int]:
        """As the Hugging Face backend encodes: the tokenizer's prefix (add_special_tokens, else
        add_bos_token, else the tokenizer's own choice), not twice where the string starts with
        it as text."""
        bos_text = self._prefix_text
        if add_special_tokens is None and bos_text and string.startswith(bos_text):
            # Hugging Face's tokenizer reads the text "</s>" as the special token itself and adds
            # no second one; offgen's encode takes text as text, so the token is put there.
            ids = [self.prefix_token_id] + self.llm.encode(string[len(bos_text):])
        else:
            if add_special_tokens is not None:
                add = add_special_tokens
            elif self._add_bos is not None:
                add = self._add_bos
            else:
                add = True  # the tokenizer's own choice: its prefix, which may be nothing
            ids = (self._prefix_ids() if add else []) + self.llm.encode(string)
        if left_truncate_len:
            ids = ids[-left_truncate_len:]
        return ids

    def _prefix_ids(self) -> List[int]:
        if self._prompt_prefix:
            return list(self._prompt_prefix)
        # add_bos_token=True on a tokenizer that adds nothing by itself: its BOS, if it has one.
        return [int(self._bos)] if self._add_bos and self._bos is not None else []

    def tok_decode(self, tokens: Any, skip_special_tokens: bool = True) -> str:
        del skip_special_tokens
        ids = [tokens] if isinstance(tokens, int) else list(tokens)
        return self.llm.decode(ids)

    # -- chat templates (--apply_chat_template) ----------------------------------------------

    def apply_chat_template(self, chat_history: List[Dict[str, str]],
                            add_generation_prompt: bool = True) -> str:
        """The conversation as the checkpoint's chat template renders it, as the Hugging Face
        backend renders it (a template that refuses a system message is tried again without
        one, as that backend does)."""
        try:
            return self.llm.apply_chat_template(chat_history, add_generation_prompt)
        except Error:
            without_system = [m for m in chat_history if m.get("role") != "system"]
            if len(without_system) == len(chat_history):
                raise
            return self.llm.apply_chat_template(without_system, add_generation_prompt)

    def chat_template(self, chat_template: Any = False) -> Optional[str]:
        if chat_template is False or chat_template is None:
            return None
        return self.llm.chat_template()

    # -- log-likelihoods -------------------------------------------------------------------

    def _loglikelihood_tokens(self, requests: Sequence[Tuple[Any, List[int], List[int]]],
                              disable_tqdm: bool = False, **kwargs: Any) -> List[Tuple[float, bool]]:
        """(sum of the continuation's log-probs, whether greedy decoding writes it) of each
        ((context, continuation), context ids, continuation ids), as the Hugging Face backend
        computes them: the last max_length + 1 tokens of context + continuation are scored."""
        texts = []
        spans = []
        for _, context_enc, continuation_enc in requests:
            if not continuation_enc:
                raise ValueError("a loglikelihood request has an empty continuation")
            if len(continuation_enc) > self._max_length:
                raise ValueError(f"a continuation of {len(continuation_enc)} tokens is longer "
                                 f"than max_length {self._max_length}")
            whole = (list(context_enc) + list(continuation_enc))[-(self._max_length + 1):]
            texts.append(whole)
            spans.append(min(len(continuation_enc), len(whole) - 1))
        scored = self._score(texts, disable_tqdm)
        answers = []
        for (request, _, _), out, n in zip(requests, scored, spans):
            total = len(out.token_ids)
            logprob = float(sum(out.token_logprobs[total - n:]))
            greedy = all(a == t for a, t in zip(out.argmax_ids[total - n:], out.token_ids[total - n:]))
            answer = (logprob, greedy)
            if request is not None:
                self.cache_hook.add_partial("loglikelihood", request, answer)
            answers.append(answer)
        return answers

    def loglikelihood_rolling(self, requests: List[Any], disable_tqdm: bool = False) -> List[float]:
        """The log-likelihood of each whole text, in disjoint windows of max_length tokens, each
        conditioned on the token before it (the first on the prefix token)."""
        windows: List[Tuple[Any, List[int], List[int]]] = []
        counts = []
        for (string,) in (r.args for r in requests):
            pairs = [harness_utils.make_disjoint_window(w) for w in
                     harness_utils.get_rolling_token_windows(
                         token_list=self.tok_encode(string), prefix_token=self.prefix_token_id,
                         max_seq_len=self._max_length, context_len=1)]
            windows.extend((None, ctx, cont) for ctx, cont in pairs)
            counts.append(len(pairs))
        scores = self._loglikelihood_tokens(windows, disable_tqdm=disable_tqdm)
        totals = []
        at = 0
        for request, count in zip(requests, counts):
            total = float(sum(s for s, _ in scores[at:at + count]))
            at += count
            self.cache_hook.add_partial("loglikelihood_rolling", (request.args[0],), total)
            totals.append(total)
        return totals

    def _score(self, texts: List[List[int]], disable_tqdm: bool) -> List[Any]:
        return _longest_first(texts, len, lambda ordered: self.llm.score(
            ordered, prefill_tokens=self._prefill_tokens, argmax=True,
            use_tqdm=not disable_tqdm))

    # -- generation ------------------------------------------------------------------------

    def generate_until(self, requests: List[Any], disable_tqdm: bool = False) -> List[str]:
        """Each (context, generation kwargs) completed until a stop string, EOS or max_gen_toks
        new tokens, the context cut from the left to leave room for them; the text ends before
        the first stop string, as the Hugging Face backend cuts it."""
        eos_text = self._eos_text
        prompts = []
        params = []
        stops = []
        for context, gen_kwargs in (r.args for r in requests):
            kwargs = normalize_gen_kwargs(dict(gen_kwargs), self._max_gen_toks)
            until = handle_stop_sequences(kwargs.pop("until", None), eos=eos_text)
            max_gen = int(kwargs.pop("max_gen_toks"))
            if max_gen >= self._max_length:
                raise ValueError(f"max_gen_toks {max_gen} leaves no room for a context in "
                                 f"max_length {self._max_length}")
            prompts.append({"prompt_token_ids":
                            self.tok_encode(context, left_truncate_len=self._max_length - max_gen)})
            params.append(self._sampling(kwargs, until, eos_text, max_gen))
            stops.append(until)
        jobs = list(zip(prompts, params))
        outputs = _longest_first(jobs, lambda job: len(job[0]["prompt_token_ids"]),
                                 lambda ordered: self.llm.generate(
                                     [p for p, _ in ordered], [q for _, q in ordered],
                                     use_tqdm=not disable_tqdm))
        texts = []
        for request, out, until in zip(requests, outputs, stops):
            text = postprocess_generated_text(out.outputs[0].text, until, None)
            self.cache_hook.add_partial("generate_until", request.args, text)
            texts.append(text)
        return texts

    def _sampling(self, kwargs: Dict[str, Any], until: List[str], eos_text: str,
                  max_gen: int) -> SamplingParams:
        temperature = float(kwargs.pop("temperature", 0.0) or 0.0)
        if not kwargs.pop("do_sample", False):
            temperature = 0.0
        elif temperature <= 0.0:
            raise ValueError("generation kwargs: do_sample=True needs a temperature > 0")
        if "max_length" in kwargs:
            raise ValueError("generation kwargs: give max_gen_toks (new tokens), not max_length")
        top_p = float(kwargs.pop("top_p", 1.0) or 1.0)
        top_k = int(kwargs.pop("top_k", 0) or 0)
        seed = kwargs.pop("seed", None)
        repetition_penalty = float(kwargs.pop("repetition_penalty", 1.0) or 1.0)
        unknown = sorted(kwargs)
        if unknown:
            raise ValueError(f"generation kwargs offgen does not take: {', '.join(unknown)}")
        # EOS ends a generation by itself; the other stop strings are the engine's stop strings.
        stop = [s for s in until if s and s != eos_text]
        return SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k,
                              max_tokens=max_gen, stop=stop or None,
                              seed=None if seed is None else int(seed),
                              repetition_penalty=repetition_penalty)


# The harness's registry finds its own models lazily only while it is empty: they are imported
# above, so registering offgen leaves them all there. Run as ``python -m offgen.lm_eval``, this
# file is __main__, and main() imports it once more as offgen.lm_eval, which registers its class
# (registering both would be two classes under one name, which the registry refuses).
if __name__ != "__main__":
    register_model("offgen")(OffgenLM)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """lm-evaluation-harness's command line, with offgen registered as ``--model offgen``."""
    import sys

    import offgen.lm_eval  # noqa: F401  (registers offgen where this file runs as __main__)
    from lm_eval.__main__ import cli_evaluate

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    cli_evaluate()


if __name__ == "__main__":
    main()
