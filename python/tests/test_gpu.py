"""GPU tracing from Python (docs/gpu.md): ``opsight.profile(cuda=...)``, ``OPSIGHT_CUDA``.

Without a GPU (CI, this machine) these tests prove that asking for GPU tracing where it
cannot run says why in one line and records everything else; the kernel tests need an
NVIDIA GPU and driver and skip, saying so, where there is none (scripts/device/gpu_check.sh
runs them on a GPU machine).
"""

from __future__ import annotations

import ctypes
import subprocess

import pytest

import opsight
from conftest import OPSIGHT, PYTHON, clean_environment, require


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_cuda_where_it_cannot_run_says_why_in_one_line_and_records_the_rest(tmp_path):
    if _driver_present():
        pytest.skip("an NVIDIA driver is present: test_kernels_nest_under_their_operator covers it")
    script = tmp_path / "app.py"
    script.write_text(
        "import opsight\n"
        "with opsight.profile(cuda=True) as prof:\n"
        "    with opsight.span('work'):\n"
        "        pass\n"
        "frame = prof.dataframe()\n"
        "print('spans', sorted(set(frame['name'])))\n")
    done = subprocess.run([PYTHON, str(script)], capture_output=True, text=True, timeout=120,
                          env=clean_environment())
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "GPU tracing off" in line]
    assert len(lines) == 1, done.stderr
    assert "no NVIDIA driver" in lines[0] or "built without CUDA" in lines[0], lines[0]
    assert "spans ['work']" in done.stdout


def test_cuda_left_to_decide_stays_off_without_cuda_in_use(tmp_path):
    script = tmp_path / "app.py"
    script.write_text(
        "import torch, opsight\n"
        "for _ in range(3):\n"
        "    with opsight.profile() as prof:\n"
        "        torch.ones(4) + 1\n"
        "ours = [c for c, _ in torch.cuda._queued_calls if c.__module__ == 'opsight.integrations.cuda']\n"
        "print('queued', len(ours))\n")
    done = subprocess.run([PYTHON, str(script)], capture_output=True, text=True, timeout=180,
                          env=clean_environment())
    assert done.returncode == 0, done.stderr
    assert "GPU" not in done.stderr, done.stderr
    assert "queued 1" in done.stdout, "one call waits in torch's queue, however many sessions"


def test_under_opsight_run_gpu_tracing_starts_when_torch_initialises_cuda(tmp_path):
    """The session of ``opsight run`` begins before the program imports torch; GPU tracing
    waits for torch to initialise CUDA (torch's queue of calls run at its lazy init, which
    the program stands in for here: this machine has no GPU), then starts, or, without a
    driver, says why in one line."""
    if _driver_present():
        pytest.skip("an NVIDIA driver is present: test_kernels_nest_under_their_operator covers it")
    script = tmp_path / "app.py"
    script.write_text(
        "import torch\n"
        "ours = [call for call, _ in torch.cuda._queued_calls\n"
        "        if call.__module__ == 'opsight.integrations.cuda']\n"
        "print('queued before init', len(ours))\n"
        "for call in ours:  # what torch.cuda._lazy_init runs once CUDA is up\n"
        "    call()\n")
    done = subprocess.run([OPSIGHT, "run", "--no-store", "--report", "none", "-o",
                           str(tmp_path / "run.opsight"), "--", PYTHON, str(script)],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env=clean_environment())
    assert done.returncode == 0, done.stderr
    assert "queued before init 1" in done.stdout, done.stdout
    lines = [line for line in done.stderr.splitlines() if "GPU tracing off" in line]
    assert len(lines) == 1, done.stderr
    assert "no NVIDIA driver" in lines[0] or "built without CUDA" in lines[0], lines[0]


def test_bad_cuda_values_are_errors_that_name_them(monkeypatch):
    with pytest.raises(ValueError, match="cuda must be True, False or None"):
        opsight.profile(cuda="yes")
    monkeypatch.setenv("OPSIGHT_CUDA", "2")
    with pytest.raises(RuntimeError, match="OPSIGHT_CUDA='2'"):
        with opsight.profile():
            pass


def test_kernels_nest_under_their_operator():
    torch = require("torch")
    if not _driver_present() or not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU and driver (scripts/device/gpu_check.sh runs this on one)")
    a = torch.randn(512, 512, device="cuda")
    with opsight.profile(cuda=True) as prof:
        (a @ a).sum().item()
    frame = prof.dataframe()
    kernels = frame[frame["category"] == "gpu_kernel"]
    assert len(kernels) >= 2, frame[["name", "category"]]
    launches = frame[frame["category"] == "cuda_runtime"]
    assert "cudaLaunchKernel" in set(launches["name"]) or "cuLaunchKernel" in set(launches["name"])


def test_the_switch_reaches_gpu_tracing_and_is_harmless_without_it():
    # No collection runs here (no GPU): the switch says so and changes nothing else.
    assert opsight._native.set_gpu_tracing_paused(True) is False
    assert opsight._native.set_gpu_tracing_paused(False) is False
    with opsight.profile(cuda=False) as prof:
        opsight.disable()
        with opsight.span("while off"):
            pass
        opsight.enable()
        with opsight.span("while on"):
            pass
    assert set(prof.dataframe()["name"]) == {"while on"}


def _installed_libopsight() -> str:
    from pathlib import Path
    library = Path(opsight.__file__).parent / "lib" / "libopsight.so.0"
    assert library.exists(), f"the package installs libopsight.so ({library})"
    return str(library)


def test_libopsight_as_cudas_injection_library_records_the_process_and_its_gpu(tmp_path):
    """What the CUDA driver does with CUDA_INJECTION64_PATH=libopsight.so at cuInit: load the
    library (its constructor starts the OPSIGHT_OUTPUT session) and call InitializeInjection
    (GPU tracing starts; here, with no driver, one line says why). ``-S``: no opsight
    package in this process, as in a C++ program."""
    if _driver_present():
        pytest.skip("an NVIDIA driver is present: scripts/device/gpu_check.sh covers it")
    output = tmp_path / "app.opsight"
    code = ("import ctypes, sys\n"
            f"library = ctypes.CDLL({_installed_libopsight()!r})\n"
            "print('initialised', library.InitializeInjection())\n")
    from opsight._session.gpu import cupti_path

    assert cupti_path(), "torch's nvidia-cuda-cupti wheel is installed (requirements/base.txt)"
    done = subprocess.run([PYTHON, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          env=clean_environment(OPSIGHT_OUTPUT=str(output),
                                                OPSIGHT_CUPTI_PATH=cupti_path()))
    assert done.returncode == 0, done.stderr
    assert "initialised 1" in done.stdout
    lines = [line for line in done.stderr.splitlines() if "GPU tracing off" in line]
    assert len(lines) == 1 and "no NVIDIA driver" in lines[0], done.stderr
    assert output.exists(), "the injected library's session wrote its trace"


def test_the_injection_library_leaves_a_process_the_python_package_records(tmp_path):
    """A Python process under OPSIGHT_OUTPUT records through the package; a libopsight.so
    loaded later by the driver (inherited CUDA_INJECTION64_PATH) starts no second session."""
    output = tmp_path / "app.opsight"
    code = ("import ctypes, os\n"
            f"library = ctypes.CDLL({_installed_libopsight()!r})\n"
            "print('initialised', library.InitializeInjection())\n"
            "print('owner', os.environ['OPSIGHT_SESSION_PID'] == str(os.getpid()))\n")
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120,
                          env=clean_environment(OPSIGHT_OUTPUT=str(output)))
    assert done.returncode == 0, done.stderr
    assert "initialised 1" in done.stdout and "owner True" in done.stdout, done.stdout
    assert "GPU tracing off" not in done.stderr, done.stderr
    assert output.exists()


def test_opsight_run_names_the_injection_library_for_programs_that_are_not_python(tmp_path):
    show = "import os; print('injection', os.environ.get('CUDA_INJECTION64_PATH'))"
    for command, expected in ((["sh", "-c", f"{PYTHON} -S -c \"{show}\""], "libopsight.so"),
                              ([PYTHON, "-c", show], "injection None")):
        done = subprocess.run([OPSIGHT, "run", "--no-store", "--report", "none", "-o",
                               str(tmp_path / "run.opsight"), "--", *command],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env=clean_environment())
        assert done.returncode == 0, done.stderr
        assert expected in done.stdout, (command, done.stdout)
