"""The docs name only what is there: every repository path that docs/architecture.md and the
README's layout table name (in backticks or as a link) exists, and every link between the
docs leads to a file; web/package.json's ``engines`` say what the README says about Node.js.

A path is resolved from the repository root, the folders the docs name paths from (``src/``,
``python/``, ``python/opsight/``, ``web/``, ``web/src/``, ``docs/``) and, in a table, the
folder the row is about; a bare file name (``io.hpp``) needs a file of that name in the
repository (under the row's folder when there is one)."""

from __future__ import annotations

import glob
import json
import re
import subprocess
from functools import lru_cache
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]

#: Folders the docs name paths relative to (besides the root and a table row's folder).
BASES = ("", "docs", "src", "include", "python", "python/opsight", "web", "web/src")

#: What a bare file name must end with to be taken for a path (``onnxruntime.py``, ``io.hpp``).
FILE_SUFFIXES = (".py", ".cc", ".hpp", ".h", ".ts", ".mjs", ".json", ".md", ".sh", ".txt",
                 ".toml", ".yaml", ".yml", ".cmake")

#: Backticked words with a slash that are not repository paths.
NOT_PATHS = {
    "runs.db.traces/",  # the run store's folder of large traces, in $OPSIGHT_HOME
    "opsight/web/",  # where the installed package keeps the built web app
    "web/dist/",  # what `make web` builds (not in a fresh checkout)
}

#: A token that may be a path: no spaces, quotes, wildcards, placeholders or URL schemes.
PATH_LIKE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*$")


@lru_cache(maxsize=None)
def _tracked_names() -> dict[str, list[str]]:
    """Every file the repository holds (git ls-files, or a walk outside a checkout), by its
    base name."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                                cwd=ROOT, capture_output=True, text=True, check=True,
                                timeout=60).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        listed = [str(path.relative_to(ROOT)) for path in ROOT.rglob("*") if path.is_file()
                  and not {"build", "node_modules", ".git"} & set(path.parts)]
    names: dict[str, list[str]] = {}
    for path in listed:
        if (ROOT / path).exists():  # deleted in the working tree: not there
            names.setdefault(Path(path).name, []).append(path)
    return names


def _is_path(token: str) -> bool:
    if token in NOT_PATHS or not PATH_LIKE.match(token) or token.startswith(".") and "/" not in token:
        return False
    if "/" in token:
        # HARDWARE/BACKEND, Recording.start/stop: words, not paths; a path starts with a
        # lower-case folder and has no empty part but a trailing slash.
        parts = token.rstrip("/").split("/")
        return all(parts) and not parts[0][0].isupper()
    return token.endswith(FILE_SUFFIXES)


def _exists(candidate: Path, stem: bool) -> bool:
    """``candidate`` exists, or (``stem``: a C++ unit named without its extension, as
    ``zipkin/zipkin_encoder``) a file ``candidate.*`` does."""
    if candidate.exists():
        return True
    return stem and candidate.parent.is_dir() and any(
        path.is_file() for path in candidate.parent.glob(glob.escape(candidate.name) + ".*"))


def _resolves(token: str, context: list[Path], document: Path) -> bool:
    path = token.rstrip("/")
    stem = not token.endswith("/") and "/" in path and "." not in path.rsplit("/", 1)[1]
    for base in [document.parent, *context, *(ROOT / base for base in BASES)]:
        if _exists(base / path, stem):
            return True
    if "/" not in path:  # a bare file name: somewhere (under the block's folders, if any)
        found = _tracked_names().get(path, [])
        if context:
            return any((ROOT / found_path).resolve().is_relative_to(folder.resolve())
                       for found_path in found for folder in context)
        return bool(found)
    return False


def _folders(tokens: list[str], document: Path) -> list[Path]:
    """The folders among ``tokens`` (a placeholder cut off: ``src/export/<sink>/`` names
    ``src/export``), resolved from the document's folder or a base."""
    folders = []
    for token in tokens:
        token = re.split(r"[<*{]", token, maxsplit=1)[0].rstrip("/")
        if not token or not PATH_LIKE.match(token):
            continue
        for base in [document.parent, *(ROOT / base for base in BASES)]:
            if (base / token).is_dir():
                folders.append(base / token)
                break
    return folders


def _blocks(text: str) -> list[tuple[list[tuple[int, str]], str]]:
    """The text as blocks of (line number, line): a table row (kind "row"), a list item
    with its indented continuation lines ("item"), any other line ("line")."""
    blocks: list[tuple[list[tuple[int, str]], str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("|"):
            blocks.append(([(number, line)], "row"))
        elif re.match(r"^\s*[-*] ", line):
            blocks.append(([(number, line)], "item"))
        elif line.startswith("  ") and line.strip() and blocks and blocks[-1][1] == "item":
            blocks[-1][0].append((number, line))
        else:
            blocks.append(([(number, line)], "line"))
    return blocks


def _named_paths(document: Path, text: str) -> list[tuple[int, str, list[Path]]]:
    """(line number, token, the folders its block is about) of each backticked token or link
    target that looks like a repository path. A table row is about the folders its first
    cell names (``record`` in the core's table is ``src/record``), a list item about every
    folder it names (``src/export/<sink>/``, then ``otlp/`` in it)."""
    named = []
    for lines, kind in _blocks(text):
        context: list[Path] = []
        if kind == "row":
            first_cell = lines[0][1].strip().strip("|").split("|")[0]
            context = _folders(re.findall(r"`([^`]+)`", first_cell), document)
        elif kind == "item":
            context = _folders(re.findall(r"`([^`]+)`", " ".join(line for _, line in lines)),
                               document)
        for number, line in lines:
            # Links: [text](target), anchors and URLs left out.
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                target = target.split("#", 1)[0]
                if target and "://" not in target and not target.startswith("mailto:"):
                    named.append((number, target, context))
            for token in re.findall(r"`([^`]+)`", line):
                if _is_path(token):
                    named.append((number, token, context))
    return named


def _missing(document: Path, text: str) -> list[str]:
    return [f"{document.relative_to(ROOT)}:{number}: `{token}`"
            for number, token, context in _named_paths(document, text)
            if not _resolves(token, context, document)]


def _readme_layout() -> str:
    """The README's layout section: from '## Layout' to the next heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    assert match, "README.md has no '## Layout' section"
    return match.group(1)


def test_every_path_architecture_md_names_exists():
    document = ROOT / "docs" / "architecture.md"
    assert _missing(document, document.read_text(encoding="utf-8")) == []


def test_every_path_the_readme_layout_table_names_exists():
    layout = _readme_layout()
    assert "|" in layout, "the README's layout section has no table"
    assert _missing(ROOT / "README.md", layout) == []


def test_every_link_between_the_docs_leads_to_a_file():
    missing = []
    for document in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                target = target.split("#", 1)[0]
                if not target or "://" in target or target.startswith("mailto:"):
                    continue
                if not (document.parent / target).exists():
                    missing.append(f"{document.relative_to(ROOT)}:{number}: {target}")
    assert missing == []


def test_the_check_finds_a_stale_path():
    """The checker itself: a renamed file, a folder that is gone and a dead link are found;
    words with slashes and placeholders are not taken for paths."""
    document = ROOT / "docs" / "architecture.md"
    text = ("| `record` | `sampling.cc`, `no_such_file.cc` |\n"
            "`python/opsight/no_such_module.py`, `src/no_such_module/`, [x](no_such_doc.md), "
            "`HARDWARE/BACKEND`, `Recording.start/stop`, `src/io/<format>/`, `*_fuzzer.cc`, "
            "`--to`, `io.hpp`\n"
            "- a reader in `src/io/<format>/` (as `native/`, `no_such_format/`): its\n"
            "  `native/native_reader` and `native/no_such_reader`\n")
    assert _missing(document, text) == [
        "docs/architecture.md:1: `no_such_file.cc`",
        "docs/architecture.md:2: `no_such_doc.md`",
        "docs/architecture.md:2: `python/opsight/no_such_module.py`",
        "docs/architecture.md:2: `src/no_such_module/`",
        "docs/architecture.md:3: `no_such_format/`",
        "docs/architecture.md:4: `native/no_such_reader`",
    ]


def test_web_package_json_asks_for_the_node_versions_the_readme_names():
    """README: Node.js 20 or newer (scripts/setup.sh checks the same). ``node --test
    FOLDER/`` searches the folder on Node 20 only (Node 22 and newer run it as a module and
    fail), so the browser tests are named by a shell glob."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Node.js 20 or newer" in readme
    package = json.loads((ROOT / "web" / "package.json").read_text(encoding="utf-8"))
    assert package["engines"]["node"] == ">=20"
    assert package["scripts"]["e2e"] == "node --test e2e/*.test.mjs"
