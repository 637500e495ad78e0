"""What a worker reports about the machine it measured on: CPU model and cores, memory,
GPU model, driver and CUDA versions, library versions, host and Ray node id. Read from
/proc, torch and NVIDIA's driver file, importing nothing that is not there already."""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
            for line in file:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _nvidia_driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as file:
            first = file.readline()
    except OSError:
        return None
    for word in first.split():
        if word[:1].isdigit() and "." in word:
            return word
    return None


def _gpus() -> tuple[list[str], str | None]:
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811
        except ImportError:
            return [], None
    cuda = getattr(torch.version, "cuda", None)
    try:
        if not torch.cuda.is_available():
            return [], cuda
        return [torch.cuda.get_device_name(index)
                for index in range(torch.cuda.device_count())], cuda
    except Exception:  # noqa: BLE001 - a broken driver: no GPU to report
        return [], cuda


def hardware_facts(node_id: str | None = None) -> dict[str, Any]:
    """This machine's facts, JSON-ready."""
    from .._store import package_versions

    gpus, cuda = _gpus()
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "node_id": node_id,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "memory_bytes": _memory_bytes(),
        "machine": platform.machine(),
        "os": f"{platform.system()} {platform.release()}",
        "gpus": gpus,
        "nvidia_driver": _nvidia_driver(),
        "cuda": cuda,
        "versions": dict(package_versions()),
    }


def facts_line(facts: dict[str, Any]) -> str:
    """One line for a table: ``Intel Xeon ... x8, 31 GiB, NVIDIA A10G (driver 550.54), node 5f3a12``."""
    parts = []
    cpu = facts.get("cpu_model") or facts.get("machine") or "CPU"
    cores = facts.get("cpus_usable") or facts.get("cpu_count")
    parts.append(f"{cpu} x{cores}" if cores else cpu)
    memory = facts.get("memory_bytes")
    if memory:
        parts.append(f"{memory / 2**30:.0f} GiB")
    for gpu in facts.get("gpus") or []:
        driver = facts.get("nvidia_driver")
        parts.append(f"{gpu} (driver {driver}, CUDA {facts.get('cuda')})" if driver else gpu)
    node = facts.get("node_id")
    if node:
        parts.append(f"node {node[:8]}")
    return ", ".join(parts)
