"""The CI gate: ``--baseline RUN|FILE --fail-on-new-breaks``. The baseline is an explain
report in JSON (``opsight explain --format json`` or ``--output x.json``), or a stored explain
run (its id, ``latest``, or a trace file), whose model spans carry each result.

A break is new when its site (reason, file name, function: :meth:`BreakSite.key`; the line
is left out so that an edit above it does not count as a new break) is absent from the
baseline's same model, or occurs more often there. A model explained in the baseline that
fails now is listed too (its breaks cannot be checked). Models the baseline does not have
are named but do not fail the gate."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from .child import RESULT_ATTRIBUTE
from .result import STATUS_OK, BreakSite, ModelExplain


class BaselineError(ValueError):
    """A baseline that cannot be read; the message names it and why."""


def load_baseline(source: str, store: str | None = None) -> dict[str, ModelExplain]:
    """The baseline's results by model name; raises :class:`BaselineError`."""
    if source.endswith(".json") or (os.path.isfile(source) and _looks_like_json(source)):
        try:
            with open(source, encoding="utf-8") as file:
                data = json.load(file)
        except OSError as error:
            raise BaselineError(f"--baseline {source}: cannot read it ({error.strerror})") from None
        except ValueError as error:
            raise BaselineError(f"--baseline {source}: not valid JSON ({error})") from None
        if not isinstance(data, dict) or not isinstance(data.get("models"), list):
            raise BaselineError(f"--baseline {source}: not an explain report (expected "
                                "{\"models\": [...]} as `opsight explain --format json` writes)")
        try:
            results = [ModelExplain.from_dict(item) for item in data["models"]]
        except (TypeError, AttributeError) as error:
            raise BaselineError(f"--baseline {source}: a model entry is malformed ({error})") \
                from None
        return {result.model: result for result in results}
    import opsight._native as _native

    try:
        trace = _native.load(source, os.fspath(store) if store else "")
    except (ValueError, RuntimeError, OSError) as error:
        raise BaselineError(f"--baseline {source}: neither an explain report nor a stored run "
                            f"({error})") from None
    columns = trace.slice_columns()
    values = columns["attributes"].get(RESULT_ATTRIBUTE)
    if not values or all(value is None for value in values):
        raise BaselineError(f"--baseline {source}: this run is not an explain run (no span "
                            f"has {RESULT_ATTRIBUTE!r})")
    results = {}
    for value in values:
        if value is None:
            continue
        result = ModelExplain.from_dict(json.loads(value))
        results[result.model] = result
    return results


def _looks_like_json(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            return file.read(64).lstrip().startswith(b"{")
    except OSError:
        return False


@dataclass
class NewBreak:
    model: str
    site: BreakSite
    added: int  # how many more times than in the baseline


@dataclass
class GateOutcome:
    new_breaks: list[NewBreak] = field(default_factory=list)
    newly_failing: list[ModelExplain] = field(default_factory=list)
    not_in_baseline: list[str] = field(default_factory=list)
    fixed: int = 0  # break occurrences gone since the baseline

    @property
    def failed(self) -> bool:
        return bool(self.new_breaks or self.newly_failing)

    def text(self) -> str:
        lines = []
        if self.new_breaks:
            total = sum(item.added for item in self.new_breaks)
            lines.append(f"{total} new graph break{'' if total == 1 else 's'} since the baseline:")
            for item in self.new_breaks:
                site = item.site
                lines.append(f"  {item.model}: {site.file}:{site.line} in {site.function}: "
                             f"{site.reason} (+{item.added})")
        for result in self.newly_failing:
            lines.append(f"  {result.model}: explained in the baseline, {result.status} now: "
                         f"{result.error}")
        if self.not_in_baseline:
            lines.append("not in the baseline (not checked): " + ", ".join(self.not_in_baseline))
        if not self.failed:
            lines.append("no new graph breaks since the baseline"
                         + (f" ({self.fixed} fewer)" if self.fixed else ""))
        return "\n".join(lines) + "\n"


def compare_with_baseline(results: list[ModelExplain],
                          baseline: dict[str, ModelExplain]) -> GateOutcome:
    outcome = GateOutcome()
    for result in results:
        before = baseline.get(result.model)
        if before is None:
            outcome.not_in_baseline.append(result.model)
            continue
        if before.status != STATUS_OK:
            continue
        if result.status != STATUS_OK:
            outcome.newly_failing.append(result)
            continue
        counts: dict[tuple[str, str, str], int] = {}
        for site in before.breaks:
            counts[site.key()] = counts.get(site.key(), 0) + site.count
        for site in result.breaks:
            had = counts.get(site.key(), 0)
            if site.count > had:
                outcome.new_breaks.append(NewBreak(result.model, site, site.count - had))
            counts[site.key()] = max(0, had - site.count)
        outcome.fixed += sum(counts.values())
    return outcome
