"""GPU tracing for a session (docs/gpu.md): whether to ask the core's CUPTI collector for
it, and where libcupti is.

``opsight.profile(cuda=True|False)`` decides; left as None, ``OPSIGHT_CUDA=0|1`` does, and
without it GPU tracing is on when torch has already initialised CUDA in this process (a
program that uses the GPU gets its kernels; one that does not pays nothing, not even the
load of libcupti). libcupti is the one torch's ``nvidia-cuda-cupti`` wheel installed, unless
``OPSIGHT_CUPTI_PATH`` names another.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The environment variable that turns GPU tracing on (1) or off (0).
CUDA_VARIABLE = "OPSIGHT_CUDA"


def cuda_wanted(cuda: bool | None) -> bool:
    """Whether a session should trace the GPU: ``cuda`` when given, else ``OPSIGHT_CUDA``,
    else whether torch has initialised CUDA already. A bad ``OPSIGHT_CUDA`` is an error that
    names it."""
    if cuda is not None:
        if not isinstance(cuda, bool):
            raise ValueError(f"opsight.profile: cuda must be True, False or None, got {cuda!r}")
        return cuda
    value = os.environ.get(CUDA_VARIABLE, "").strip()
    if value:
        if value not in ("0", "1"):
            raise ValueError(f"{CUDA_VARIABLE}={value!r}: use 1 (trace the GPU) or 0 (do not)")
        return value == "1"
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:  # a torch without CUDA, or one half imported
        return False


def cupti_path() -> str:
    """The libcupti to load: ``OPSIGHT_CUPTI_PATH``, else the one in NVIDIA's wheels (torch's
    dependency), else empty (the core then tries a copy already loaded and the loader's
    search path)."""
    explicit = os.environ.get("OPSIGHT_CUPTI_PATH")
    if explicit:
        return explicit
    try:
        import nvidia  # namespace package of NVIDIA's wheels
    except ImportError:
        return ""
    for folder in getattr(nvidia, "__path__", []):
        for candidate in (Path(folder) / "cu13" / "lib" / "libcupti.so.13",
                          Path(folder) / "cuda_cupti" / "lib" / "libcupti.so.12"):
            if candidate.exists():
                return str(candidate)
    return ""
