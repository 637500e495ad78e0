"""GPU tracing for a session (docs/gpu.md): whether to ask the core's CUPTI collector for
it, and where libcupti is.

``opsight.profile(cuda=True|False)`` decides; left as None, ``OPSIGHT_CUDA=0|1`` does, and
without it GPU tracing starts when torch initialises CUDA in this process (at once if it
already has): a program that uses the GPU gets its kernels, one that does not pays
nothing, not even the load of libcupti. libcupti is the one torch's ``nvidia-cuda-cupti``
wheel installed, unless ``OPSIGHT_CUPTI_PATH`` names another.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

#: The environment variable that turns GPU tracing on (1) or off (0).
CUDA_VARIABLE = "OPSIGHT_CUDA"


#: What :func:`cuda_mode` decides: trace the GPU from the start, not at all, or from the
#: moment torch initialises CUDA (a program started under ``opsight run`` or
#: ``OPSIGHT_OUTPUT`` has not imported torch yet when its session starts).
ON, OFF, WHEN_CUDA_STARTS = "on", "off", "when CUDA starts"


def cuda_mode(cuda: bool | None) -> str:
    """Whether a session traces the GPU: ``cuda`` when given, else ``OPSIGHT_CUDA``, else
    on if torch has initialised CUDA already and from when it does otherwise. A bad
    ``OPSIGHT_CUDA`` is an error that names it."""
    if cuda is not None:
        if not isinstance(cuda, bool):
            raise ValueError(f"opsight.profile: cuda must be True, False or None, got {cuda!r}")
        return ON if cuda else OFF
    value = os.environ.get(CUDA_VARIABLE, "").strip()
    if value:
        if value not in ("0", "1"):
            raise ValueError(f"{CUDA_VARIABLE}={value!r}: use 1 (trace the GPU) or 0 (do not)")
        return ON if value == "1" else OFF
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return ON
    except Exception:  # a torch without CUDA, or one half imported
        pass
    return WHEN_CUDA_STARTS


#: The session that starts GPU tracing when torch initialises CUDA (see
#: opsight.integrations.cuda), or None.
waiting_session: Any = None


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
