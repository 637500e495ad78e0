"""GPU tracing that starts when the program starts using the GPU, and follows the switch
(docs/gpu.md).

A session whose ``cuda`` was left to decide (``opsight.profile()``, ``opsight run``,
``OPSIGHT_OUTPUT``) and that began before torch initialised CUDA waits for it: once torch
is imported, ``torch.cuda._lazy_call`` (torch's own queue of work to run once CUDA is
initialised; at once if it already is) starts the core's CUPTI collector in that session,
before the first kernel. A program that never uses the GPU never loads libcupti.
"""

from __future__ import annotations

import sys

from .._session import gpu, integrations, state


class CudaIntegration(integrations.Integration):
    """Starts GPU tracing in the waiting session when torch initialises CUDA."""

    name = "opsight.cuda"

    def __init__(self) -> None:
        self._watch = integrations.ImportWatch(
            self, "torch", "_torch_imported", ready=lambda torch: hasattr(torch, "cuda"))

    def on_start(self) -> None:
        if gpu.waiting_session is not None and gpu.waiting_session is state.session:
            self._watch.start()

    def on_stop(self) -> None:
        self._watch.stop()

    def on_switch(self, enabled: bool) -> None:
        """``opsight.disable()``, ``opsight ctl PID off``: CUPTI's activity kinds go off with
        the rest of tracing (no cost on the program's CUDA calls), and back on."""
        import opsight._native as _native

        _native.set_gpu_tracing_paused(not enabled)

    def _torch_imported(self) -> None:
        global _queued
        if _queued:
            return
        lazy_call = getattr(sys.modules["torch"].cuda, "_lazy_call", None)
        if lazy_call is None:  # a torch without the hook: OPSIGHT_CUDA=1 still works
            return
        _queued = True  # once per process: torch keeps its queue until CUDA starts
        lazy_call(_cuda_initialised)


#: Whether _cuda_initialised is in torch's queue already.
_queued = False


def _cuda_initialised() -> None:
    """torch initialised CUDA: trace the GPU in the session waiting for it, if any (later
    sessions find CUDA initialised and trace it from their start)."""
    session = gpu.waiting_session
    if session is None or state.session is not session:
        return
    gpu.waiting_session = None
    status = session.start_gpu_tracing(gpu.cupti_path())
    if status:
        print(f"opsight: {status}", file=sys.stderr)
