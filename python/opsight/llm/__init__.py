"""``opsight.llm``: token-level timing of LLM inference (docs/llm.md).

Time to first token (TTFT), inter-token latency (ITL), time per output token (TPOT),
end-to-end latency, tokens/s and goodput under SLOs, with one set of definitions
(:mod:`opsight.llm.metrics`), measured

- in process, around Hugging Face ``generate`` (:func:`instrument`: the call is unchanged)
  or a plain decode loop (:func:`request`, :func:`step`), as spans named after the
  OpenTelemetry GenAI conventions, whose prefill and decode steps hold the module and
  operator spans;
- from the outside of any OpenAI-compatible server (:mod:`opsight.llm.client`), under a
  load (:mod:`opsight.llm.load`): ``opsight bench --generate``.

Quick start::

    import opsight
    from opsight import llm

    model = llm.random_model("gpt2")                  # random weights, nothing downloaded
    with opsight.profile() as prof, llm.instrument(model) as generations:
        model.generate(input_ids, max_new_tokens=32)
    print(llm.render_summary(llm.summarize(generations.requests)))
"""

from __future__ import annotations

from .huggingface import Instrumented, instrument, traced_generate
from .metrics import (METRICS, RequestMetrics, SloTerm, distribution, meets, parse_slo,
                      percentile, render_summary, summarize)
from .models import RANDOM_MODELS, WordTokenizer, random_model
from .timeline import Request, iterate_tokens, request, step

__all__ = ["METRICS", "RANDOM_MODELS", "Instrumented", "Request", "RequestMetrics", "SloTerm",
           "WordTokenizer", "distribution", "instrument", "iterate_tokens", "meets",
           "parse_slo", "percentile", "random_model", "render_summary", "request", "step",
           "summarize", "traced_generate"]
