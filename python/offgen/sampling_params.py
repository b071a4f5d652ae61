"""How each request picks its tokens and when it stops: vLLM's ``SamplingParams``, with the
parameters offgen's batch files read (docs/python.md lists them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union


@dataclass
class SamplingParams:
    """Sampling parameters of one request, named and defaulted as vLLM names them.

    Every field is sent to the engine as the same key of an OpenAI Batch request body, so its
    checks and messages are those ``offgen generate`` gives for a batch file.

    - ``n``: samples of the prompt (``RequestOutput.outputs``).
    - ``temperature`` (0 = greedy), ``top_p``, ``top_k`` (0 or -1 = off), ``min_p``.
    - ``seed``: the request's sampling seed; ``None`` takes ``LLM(seed=...)`` plus the request's
      position in the call, so a result never depends on its batch-mates.
    - ``max_tokens`` (``None``: 16, the CLI's ``--max-tokens`` default), ``min_tokens``, ``stop`` (strings), ``stop_token_ids``, ``ignore_eos``,
      ``include_stop_str_in_output``, ``skip_special_tokens``.
    - ``presence_penalty``, ``frequency_penalty``, ``repetition_penalty``, ``logit_bias``.
    - ``logprobs``: ``None``, or how many most likely tokens to report at each step besides the
      one picked (0 reports the picked one only).
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: Optional[int] = None
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: Optional[Dict[int, float]] = None
    logprobs: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    """Further body keys, passed as they are (the engine refuses one it does not read)."""

    def body(self, chat: bool = False) -> Dict[str, Any]:
        """The OpenAI Batch body keys these parameters set (defaults left out)."""
        b: Dict[str, Any] = {}
        defaults = SamplingParams()
        for key in ("n", "temperature", "top_p", "min_p", "seed", "min_tokens", "ignore_eos",
                    "include_stop_str_in_output", "skip_special_tokens", "presence_penalty",
                    "frequency_penalty", "repetition_penalty"):
            value = getattr(self, key)
            if value != getattr(defaults, key):
                b[key] = value
        # vLLM's -1 and OpenAI's 0 both mean no top-k.
        if self.top_k not in (0, -1):
            b["top_k"] = self.top_k
        if self.max_tokens is not None:
            b["max_tokens"] = self.max_tokens
        if self.stop is not None:
            b["stop"] = [self.stop] if isinstance(self.stop, str) else list(self.stop)
        if self.stop_token_ids:
            b["stop_token_ids"] = list(self.stop_token_ids)
        if self.logit_bias:
            b["logit_bias"] = {str(k): v for k, v in self.logit_bias.items()}
        if self.logprobs is not None:
            if chat:
                b["logprobs"] = True
                b["top_logprobs"] = self.logprobs
            else:
                b["logprobs"] = self.logprobs
        b.update(self.extra)
        return b
