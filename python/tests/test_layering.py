"""The build's layering check (cmake/check_layering.cmake, run by every build as the
opsight_layering target): an include that crosses the one-way flow of docs/architecture.md
fails, naming the file, the include and what the module may use; an include the module's
DEPS allow, its own headers, schema's, and those of tests pass."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "cmake" / "check_layering.cmake"


def _check(tree: Path, layers: str) -> subprocess.CompletedProcess:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.fail("cmake is not installed (scripts/setup.sh installs it)")
    (tree / "layers.txt").write_text(layers)
    return subprocess.run([cmake, f"-DSOURCE_DIR={tree}", f"-DLAYERS_FILE={tree / 'layers.txt'}",
                           f"-DSTAMP={tree / 'stamp'}", "-P", str(SCRIPT)],
                          capture_output=True, text=True, timeout=60)


def _write(tree: Path, path: str, text: str) -> None:
    (tree / path).parent.mkdir(parents=True, exist_ok=True)
    (tree / path).write_text(text)


def test_an_upward_include_fails_and_names_the_file_and_what_the_module_may_use(tmp_path):
    _write(tmp_path, "src/trace/trace.cc", '#include "trace/trace.hpp"\n#include "report/report.hpp"\n')
    _write(tmp_path, "src/report/report.cc", '#include "trace/trace.hpp"\n')
    _write(tmp_path, "src/schema/names.hpp", "")
    done = _check(tmp_path, "trace:\nreport:trace;analyze\n")
    assert done.returncode != 0
    assert "src/trace/trace.cc" in done.stderr and '#include "report/report.hpp"' in done.stderr
    assert not (tmp_path / "stamp").exists()


def test_allowed_includes_own_schema_and_tests_pass(tmp_path):
    _write(tmp_path, "src/report/report.cc",
           '#include "report/report.hpp"\n#include "trace/trace.hpp"\n#include "schema/names.hpp"\n')
    _write(tmp_path, "src/trace/trace_test.cc", '#include "report/report.hpp"\n')  # a test
    _write(tmp_path, "src/trace/trace.cc", '#include <vector>\n#include "opsight/opsight.hpp"\n')
    _write(tmp_path, "src/schema/names.hpp", "")
    done = _check(tmp_path, "trace:\nreport:trace\n")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "stamp").exists()
