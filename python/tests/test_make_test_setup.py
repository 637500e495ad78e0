"""What ``make test`` relies on is written where it reads it: every name a test passes to
``OPSIGHT_REQUIRE``'s helpers (``require``, ``require_command``, ``require_modules``,
``missing``, ``installed_file``) is in the Makefile's ``OPSIGHT_REQUIRE`` list, so that under
``make test`` the test fails instead of skipping when it is missing; and the browser tests
are started in a way that works on every Node.js the README promises (20 and newer)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The helpers that fail instead of skipping when OPSIGHT_REQUIRE names their first argument.
REQUIRE_CALL = re.compile(
    r"\b(?:require|require_command|missing|installed_file)\(\s*[\"']([^\"']+)[\"']"
    r"|\brequire_modules\(([^)]*)\)")


def _makefile_require() -> set[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^OPSIGHT_REQUIRE \?= *(.*)$", makefile, re.M)
    assert match, "the Makefile sets no OPSIGHT_REQUIRE"
    return {name.strip() for name in match.group(1).split(",") if name.strip()}


def _required_by_tests() -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for folder in ("python/tests", "tests/integration"):
        for path in sorted((ROOT / folder).glob("*.py")):
            if path.name == Path(__file__).name:
                continue
            for match in REQUIRE_CALL.finditer(path.read_text(encoding="utf-8")):
                found = [match.group(1)] if match.group(1) else re.findall(
                    r"[\"']([^\"']+)[\"']", match.group(2))
                for name in found:
                    names.setdefault(name, []).append(f"{folder}/{path.name}")
    return names


def test_every_name_a_test_requires_is_in_the_makefiles_opsight_require():
    required = _required_by_tests()
    assert {"torch", "kafka", "openssl"} <= set(required)  # the scan finds the calls
    listed = _makefile_require()
    unlisted = {name: sorted(set(files)) for name, files in required.items()
                if name not in listed}
    assert unlisted == {}, (
        "these skip under make test instead of failing: add them to the Makefile's "
        f"OPSIGHT_REQUIRE (what scripts/setup.sh installs): {unlisted}")


def test_the_browser_tests_are_not_started_with_a_folder_argument():
    """``node --test FOLDER/`` searches the folder on Node 20 only; Node 22 and newer run the
    folder as a module and fail (nodejs/node#64555)."""
    commands = {f"Makefile:{number}": line.strip() for number, line in
                enumerate((ROOT / "Makefile").read_text().splitlines(), 1)
                if "node --test" in line}
    assert commands, "the Makefile runs no browser tests"
    folder_arguments = {where: command for where, command in commands.items()
                        if re.search(r"node --test\s+\S*/(\s|$)", command)}
    assert folder_arguments == {}, (
        f"name the files (`node --test e2e/*.test.mjs`): {folder_arguments}")
