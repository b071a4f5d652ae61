"""offgen from Python: throughput-oriented batch inference of OPT and LLaMA-family models on one
device, with weights and KV cache offloaded to host memory and disk.

    from offgen import LLM, SamplingParams
    llm = LLM(model="path/to/checkpoint", policy="h2o", kv_budget=0.2)
    for out in llm.generate(["Hello, my name is"], SamplingParams(max_tokens=32)):
        print(out.outputs[0].text)

The calls are shaped as vLLM's offline ``LLM``; docs/python.md shows each.
"""

from ._offgen import Error, OutOfMemoryError, UsageError, __version__, set_log_level
from .llm import LLM, RequestError
from .outputs import CompletionOutput, Logprob, RequestOutput, ScoreOutput
from .sampling_params import SamplingParams

__all__ = [
    "LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob", "ScoreOutput",
    "Error", "OutOfMemoryError", "UsageError", "RequestError", "set_log_level",
]
