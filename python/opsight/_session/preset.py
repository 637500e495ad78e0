"""Presets: named sets of recording options (docs/production.md).

``production`` is what a platform team leaves on for hours (``opsight run --production``,
or ``OPSIGHT_PRESET=production`` for a program started with ``OPSIGHT_OUTPUT``):

* every Python target and module span, always;
* torch operators for 1 in 100 root spans (``sample_scope="operators"``: the units sampled
  out keep their spans and leave out only their operators, which are what costs);
* process and GPU counters once a second;
* the flight recorder on, keeping the last 60 s in memory (dumped on ``opsight ctl PID
  dump``, SIGUSR2, an exception leaving a root span, and at the end);
* GPU tracing off (CUPTI's cost is not an always-on cost).

Each is a default: an option given explicitly (on the command line, or its variable in the
environment) wins.
"""

from __future__ import annotations

from collections.abc import MutableMapping

PRESET_VARIABLE = "OPSIGHT_PRESET"
PRESETS = ("production",)

#: The production preset, as the variables the recording session reads.
PRODUCTION = {
    "OPSIGHT_RING": "60s",
    "OPSIGHT_SAMPLE": "1/100",
    "OPSIGHT_SAMPLE_SCOPE": "operators",
    "OPSIGHT_SAMPLE_MS": "1000",
    "OPSIGHT_CUDA": "0",
}


def apply(preset: str, environment: MutableMapping[str, str]) -> list[str]:
    """Fills ``environment`` with the preset's variables where they are not set; returns the
    names it set. Raises ValueError for an unknown preset."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r} (presets: {', '.join(PRESETS)})")
    applied = []
    for name, value in PRODUCTION.items():
        if not environment.get(name):
            environment[name] = value
            applied.append(name)
    return applied


def apply_from_environment(environment: MutableMapping[str, str]) -> None:
    """``OPSIGHT_PRESET`` at a session's start: the preset's defaults into ``environment``
    (a bad name is a warning, and nothing is changed)."""
    import sys

    preset = environment.get(PRESET_VARIABLE, "").strip()
    if not preset:
        return
    try:
        apply(preset, environment)
    except ValueError as error:
        print(f"opsight: ignoring {PRESET_VARIABLE}: {error}", file=sys.stderr)
