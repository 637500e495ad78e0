"""`opsight devices`, by the real CLI:

- on this machine, as it is: without an NVIDIA driver it must say "no GPU found: ..." and
  exit 0 (text) and give "gpus": [] with the reason (JSON); with a driver it must list the
  GPUs. Whether the driver is there is decided independently of opsight, by loading
  libnvidia-ml.so.1 with ctypes, and the branch taken is printed (pytest -s shows it);
- on fake GPUs described by a JSON file named in OPSIGHT_FAKE_GPUS (the test hook of
  docs/devices.md): one hot GPU and one with a failed read, in text and JSON, so that the
  rendering is proven on machines without a GPU. The hook is only in the build tree's
  test program opsight_with_fake_gpus (the same command); the installed CLI ignores it.
"""
import ctypes
import json
import os
import subprocess

import pytest

H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-11111111-2222-3333-4444-555555555555",
    "memory_used_bytes": 1288490188,  # 1.2 GiB
    "memory_total_bytes": 85520809984,  # 79.6 GiB
    "utilization_percent": 35,
    "memory_utilization_percent": 12,
    "temperature_celsius": 87,  # within 5 °C of slowing down: hot
    "slowdown_temperature_celsius": 90,
    "power_watts": 312.5,
    "power_limit_watts": 700,
}
A10 = {
    "name": "NVIDIA A10",
    "uuid": "GPU-66666666-7777-8888-9999-000000000000",
    "memory_used_bytes": 524288000,  # 500 MiB
    "memory_total_bytes": 24146608128,  # 22.5 GiB
    "utilization_percent": 0,
    "memory_utilization_percent": 0,
    "temperature_celsius": 41,
    "slowdown_temperature_celsius": 95,
    "power_watts": 22.1,  # read fails: the fake reports no power
    "power_limit_watts": 150,
    "failed_reads": {"nvmlDeviceGetPowerUsage": "Unknown Error"},
}


def _nvidia_driver_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def _environment(**extra):
    environment = {key: value for key, value in os.environ.items()
                   if key != "OPSIGHT_FAKE_GPUS"}
    environment.update(extra)
    return environment


@pytest.fixture(scope="session")
def fake_gpu_cli(build_program):
    """Runs the build tree's `opsight_with_fake_gpus ARGS...` (the CLI with the hook)."""
    program = build_program("src/cli/opsight_with_fake_gpus")

    def run(*args, env=None):
        return subprocess.run([str(program), *args], capture_output=True, text=True,
                              timeout=120, env=env)

    return run


@pytest.fixture
def fake_gpus(tmp_path):
    path = tmp_path / "fake_gpus.json"
    path.write_text(json.dumps({"driver_version": "550.54.15", "gpus": [H100, A10]}),
                    encoding="utf-8")
    return _environment(OPSIGHT_FAKE_GPUS=str(path))


def test_devices_on_this_machine_text(opsight_cli):
    result = opsight_cli("devices", env=_environment())
    assert result.returncode == 0, result.stderr
    if _nvidia_driver_present():
        print("[devices] NVIDIA driver branch: libnvidia-ml.so.1 loads; expecting a GPU table")
        lines = result.stdout.splitlines()
        assert lines[0].startswith("NVIDIA driver "), result.stdout
        assert lines[2].split()[:3] == ["GPU", "name", "memory"], result.stdout
        assert lines[3].split()[0] == "0", result.stdout
    else:
        print("[devices] no NVIDIA driver branch: libnvidia-ml.so.1 does not load; expecting "
              "'no GPU found'")
        assert result.stdout == \
            "no GPU found: libnvidia-ml.so.1 not found (no NVIDIA driver)\n"
        assert result.stderr == ""


def test_devices_on_this_machine_json(opsight_cli):
    result = opsight_cli("devices", "--format", "json", env=_environment())
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document) == ["driver_version", "gpus", "no_gpu_reason"]
    if _nvidia_driver_present():
        print("[devices] NVIDIA driver branch: expecting GPUs in the JSON")
        assert document["gpus"], document
        assert document["no_gpu_reason"] is None
        assert document["driver_version"]
        for index, gpu in enumerate(document["gpus"]):
            assert gpu["index"] == index
            assert gpu["name"]
            assert gpu["memory_total_bytes"] > 0
            assert not gpu["health"].startswith("error"), gpu
    else:
        print("[devices] no NVIDIA driver branch: expecting an empty list and the reason")
        assert document == {
            "driver_version": None,
            "gpus": [],
            "no_gpu_reason": "no GPU: libnvidia-ml.so.1 not found (no NVIDIA driver)",
        }


def test_fake_gpus_text(fake_gpu_cli, fake_gpus):
    result = fake_gpu_cli("devices", env=fake_gpus)
    assert result.returncode == 0, result.stderr
    assert "fake GPUs from OPSIGHT_FAKE_GPUS=" in result.stderr  # never mistaken for NVML
    assert result.stdout.splitlines() == [
        "NVIDIA driver 550.54.15, 2 GPUs",
        "",
        "GPU  name                   memory used / total  util  mem busy  temp   power / limit  "
        "health",
        "  0  NVIDIA H100 80GB HBM3  1.2 GiB / 79.6 GiB   35 %  12 %      87 °C  312 W / 700 W  "
        "hot (87 °C, slows down at 90 °C)",
        "  1  NVIDIA A10             500 MiB / 22.5 GiB   0 %   0 %       41 °C  - / 150 W      "
        "error: nvmlDeviceGetPowerUsage: Unknown Error",
    ]


def test_fake_gpus_json(fake_gpu_cli, fake_gpus):
    result = fake_gpu_cli("devices", "--format", "json", env=fake_gpus)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)

    def expected(index, fake, health, **changes):
        gpu = {"index": index, **{key: value for key, value in fake.items()
                                  if key != "failed_reads"}, "health": health}
        gpu.update(changes)
        return gpu

    assert document == {
        "driver_version": "550.54.15",
        "gpus": [
            expected(0, H100, "hot (87 °C, slows down at 90 °C)"),
            expected(1, A10, "error: nvmlDeviceGetPowerUsage: Unknown Error", power_watts=None),
        ],
        "no_gpu_reason": None,
    }
    assert list(document["gpus"][0]) == [
        "index", "name", "uuid", "memory_used_bytes", "memory_total_bytes",
        "utilization_percent", "memory_utilization_percent", "temperature_celsius",
        "slowdown_temperature_celsius", "power_watts", "power_limit_watts", "health"]


def test_fake_gpu_missing_values_print_as_dash_and_null(fake_gpu_cli, tmp_path):
    path = tmp_path / "sparse.json"
    path.write_text(json.dumps({"driver_version": "550.54.15",
                                "gpus": [{"name": "Sparse GPU", "temperature_celsius": 30}]}),
                    encoding="utf-8")
    environment = _environment(OPSIGHT_FAKE_GPUS=str(path))
    text = fake_gpu_cli("devices", env=environment)
    assert text.returncode == 0, text.stderr
    row = text.stdout.splitlines()[3]
    assert row.split() == ["0", "Sparse", "GPU", "-", "-", "-", "30", "°C", "-", "ok"]
    gpu = json.loads(fake_gpu_cli("devices", "--format", "json", env=environment).stdout)["gpus"][0]
    assert gpu["memory_used_bytes"] is None and gpu["power_limit_watts"] is None
    assert gpu["uuid"] is None and gpu["health"] == "ok"


def test_bad_fake_gpu_file_is_a_one_line_error_naming_the_field(fake_gpu_cli, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"gpus": [{"temperature_celsius": -3}]}', encoding="utf-8")
    result = fake_gpu_cli("devices", env=_environment(OPSIGHT_FAKE_GPUS=str(path)))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0] and "gpus[0].temperature_celsius" in lines[0]


def test_the_installed_cli_ignores_the_fake_gpu_hook(opsight_cli, fake_gpus):
    """The hook is a test build's: the real command never lists fakes."""
    result = opsight_cli("devices", "--format", "json", env=fake_gpus)
    assert result.returncode == 0, result.stderr
    assert "fake" not in result.stderr
    assert "550.54.15" not in result.stdout


def test_bad_format_is_a_usage_error(opsight_cli):
    result = opsight_cli("devices", "--format", "csv", env=_environment())
    assert result.returncode == 64
    assert "--format" in result.stderr
