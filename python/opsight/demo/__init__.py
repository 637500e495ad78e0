"""``opsight demo``: opsight on a real model, in one command.

A small BERT-style encoder (``opsight.demo.model``, random weights, nothing downloaded)
serves a few requests, each ``tokenize`` -> ``infer`` -> ``postprocess``, inside
``opsight.profile()``. The demo prints the call tree of one request (Python spans, then
the model's modules, then the torch operators under them), the percentile summary, the
operator table and the per-request phase breakdown; then a short ``opsight bench`` of the
model on torch eager and TorchScript. It writes ``opsight-demo.opsight`` and
``opsight-demo.json`` (open it in https://ui.perfetto.dev) in the working directory and
saves the profile and the benchmarks as runs in the run store (``opsight runs``).

``opsight demo --quickstart`` runs the C++ quick-start program instead (no torch needed).
"""

from __future__ import annotations

import argparse
import sys
import zlib

from ..exit_codes import USAGE_ERROR


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opsight demo",
        description="Profile and benchmark a small BERT-style model (random weights).")
    parser.add_argument("--requests", type=int, default=8, help="requests profiled (default 8)")
    parser.add_argument("--bench-iterations", type=int, default=50,
                        help="timed queries per back-end in the bench (default 50; 0: no bench)")
    parser.add_argument("--no-store", action="store_true", help="do not save runs in the store")
    parser.add_argument("--output", default="opsight-demo",
                        help="stem of the trace files written (default opsight-demo)")
    return parser


def _texts(count: int) -> list[list[str]]:
    words = ("the quick brown fox jumps over the lazy dog while opsight measures where the "
             "time of every request goes").split()
    return [[words[(request * 7 + index) % len(words)] for index in range(48 + request % 16)]
            for request in range(count)]


def main(arguments: list[str]) -> int:
    if arguments[:1] == ["--quickstart"]:
        from .._core_command import exec_core

        return exec_core(["demo", *arguments[1:]])
    try:
        options = _parser().parse_args(arguments)
    except SystemExit as exit_:  # argparse: --help (0) or bad usage, message printed
        return 0 if not exit_.code else USAGE_ERROR
    if options.requests < 1 or options.bench_iterations < 0:
        print("opsight demo: --requests must be >= 1 and --bench-iterations >= 0", file=sys.stderr)
        return USAGE_ERROR
    try:
        import torch
    except ImportError:
        print("opsight demo: torch is not installed: pip install torch, or run "
              "`opsight demo --quickstart` for the C++ example", file=sys.stderr)
        return 1

    import opsight

    from .model import TinyBertConfig, build

    config = TinyBertConfig()
    batch_size, length = 4, 64
    model, _ = build(batch_size, length)
    print(f"opsight demo: a BERT-style encoder ({config.num_layers} layers, hidden "
          f"{config.hidden_size}, {config.num_heads} heads, random weights), batch {batch_size} "
          f"x {length} tokens, torch {torch.__version__}, {torch.get_num_threads()} threads\n")

    @opsight.trace("tokenize")
    def tokenize(batch: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        ids = [[zlib.crc32(word.encode()) % config.vocab_size for word in text[:length]]
               for text in batch]
        ids = [row + [0] * (length - len(row)) for row in ids]
        mask = [[1 if index < len(text) else 0 for index in range(length)] for text in batch]
        return torch.tensor(ids), torch.tensor(mask)

    @opsight.trace("infer")
    def infer(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return model(input_ids, attention_mask)

    @opsight.trace("postprocess")
    def postprocess(logits: torch.Tensor) -> list[int]:
        return torch.softmax(logits, dim=-1).argmax(dim=-1).tolist()

    @opsight.trace("handle_request")
    def handle_request(batch: list[list[str]]) -> list[int]:
        return postprocess(infer(*tokenize(batch)))

    texts = _texts(batch_size * options.requests)
    batches = [texts[start:start + batch_size] for start in range(0, len(texts), batch_size)]
    handle_request(batches[0])  # warm-up, outside the profile (first calls allocate)

    with opsight.profile(store=not options.no_store, name="demo: tiny-bert requests",
                         tags={"kind": "demo", "model": "tiny-bert"}) as profile:
        for batch in batches:
            handle_request(batch)
    profile.save(f"{options.output}.opsight")
    profile.export_chrome_trace(f"{options.output}.json")

    print("== One request: Python spans > modules (operators folded: opsight report "
          f"{options.output}.opsight --tree shows them) ==")
    profile.print_tree(max_roots=1, max_depth=5)
    print("\n== Where the requests' time goes (per request, p50 ... p99) ==")
    profile.print_breakdown("handle_request")
    print("\n== Top operators ==")
    profile.print_operators(limit=12)
    print("\n== Summary of the Python spans and modules ==")
    profile.print_summary(limit=12)
    print(f"\nwrote {options.output}.opsight and {options.output}.json (open it in "
          "https://ui.perfetto.dev)")

    if options.bench_iterations:
        import opsight.bench

        for backend in ("eager", "torchscript"):
            print(f"\n== opsight bench: {backend}, single-stream ==")
            model_for_bench, inputs = build(batch_size, length)
            try:
                result = opsight.bench.run(
                    model_for_bench, inputs, backend=backend, scenario="single-stream",
                    warmup=5, iterations=options.bench_iterations, profile_iterations=0,
                    store=not options.no_store, name=f"demo: tiny-bert bench {backend}",
                    tags={"kind": "demo", "model": "tiny-bert"})
            except opsight.bench.BenchError as error:
                print(f"opsight demo: the {backend} bench failed: {error}", file=sys.stderr)
                continue
            result.print()
    print("\nnext: opsight runs | opsight report opsight-demo.opsight --ops | "
          "opsight compare latest~1 latest")
    return 0
