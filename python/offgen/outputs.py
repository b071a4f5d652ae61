"""What ``LLM.generate``, ``LLM.chat`` and ``LLM.score`` return: vLLM's ``RequestOutput`` and
``CompletionOutput`` shapes, read from the records ``offgen generate`` writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class Logprob:
    """A token's log-probability under the model (log-softmax of the raw logits), its rank among
    the step's most likely tokens (1 = most likely; None when it is not among those reported),
    and its text."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class CompletionOutput:
    """One sample of a request."""

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[List[Dict[int, Logprob]]]
    finish_reason: Optional[str]
    stop_reason: Optional[object] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """A request's prompt and its samples (``outputs``), or the problem that kept it from running
    (``error``, with ``outputs`` empty)."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool = True
    error: Optional[str] = None
    record: dict = field(default_factory=dict, repr=False)
    """The record ``offgen generate`` writes for this request, as it is."""


@dataclass
class ScoreOutput:
    """Log-probabilities of a text's tokens: ``token_logprobs[i] = log p(token_ids[i] |
    token_ids[:i])``, ``None`` for the first token (nothing to condition on)."""

    token_ids: List[int]
    token_logprobs: List[Optional[float]]
    sum_logprob: float
    num_scored: int
    perplexity: Optional[float]
    truncated_from: Optional[int] = None
    argmax_ids: Optional[List[Optional[int]]] = None
    """With ``score(..., argmax=True)``: the most likely id at each position given the tokens
    before it (``None`` at 0), so ``argmax_ids[i] == token_ids[i]`` says greedy decoding would
    have written token i."""
    record: dict = field(default_factory=dict, repr=False)
