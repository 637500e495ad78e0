"""The errors of loading and running models, and one line of text for any exception.

Every model tool (``opsight bench``, ``opsight compare-backends``, ``opsight explain``,
``opsight model``) says what failed in one line naming the thing at fault: these are that
line's parts."""

from __future__ import annotations


class ModelError(Exception):
    """A model, its inputs or a back-end that cannot be used; the message names the thing
    at fault and says why (``opsight bench`` prints it and exits 1). ``opsight.bench``
    calls it ``BenchError``."""


class FactoryError(ModelError):
    """A ``module:factory`` / ``path/to/file.py:factory`` that cannot be found or imported;
    the message starts with the spec and says why."""


def first_line(text: str, limit: int = 300) -> str:
    """The first line of ``text`` (stripped), cut to ``limit`` characters with ``...``."""
    text = str(text).strip()
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


def error_text(error: BaseException, limit: int = 300) -> str:
    """``"ValueError: the first line of its message"``, or the type's name alone when the
    message is empty."""
    line = first_line(str(error), limit)
    return f"{type(error).__name__}: {line}" if line else type(error).__name__
