"""opsight explain's result is defined once, by the Python package
(``opsight.explain.result``: ``ModelExplain`` and ``BreakSite``); the UI server passes it
through as stored, and ``docs/ui-openapi.json`` describes it (``ExplainModel``,
``ExplainBreak``), from which the web app's types are generated (``npm run gen-types``).
This keeps the description equal to the definition, field by field."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from opsight.explain.result import BreakSite, ModelExplain

ROOT = Path(__file__).resolve().parents[2]


def _schemas() -> dict:
    return json.loads((ROOT / "docs" / "ui-openapi.json").read_text())["components"]["schemas"]


def _no_default(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}


def test_the_explain_model_schema_names_every_field_of_the_result():
    schema = _schemas()["ExplainModel"]
    fields = {f.name for f in dataclasses.fields(ModelExplain)}
    assert set(schema["properties"]) == fields | {"span"}  # span: added by the server
    assert _no_default(ModelExplain) <= set(schema["required"])


def test_the_break_site_schema_names_every_field_of_a_break_site():
    schema = _schemas()["ExplainBreak"]
    assert set(schema["properties"]) == {f.name for f in dataclasses.fields(BreakSite)}
    assert _no_default(BreakSite) <= set(schema["required"])


def test_a_field_that_may_be_none_is_nullable_in_the_schema():
    schema = _schemas()["ExplainModel"]["properties"]
    for field in dataclasses.fields(ModelExplain):
        if field.default is None:
            assert schema[field.name].get("nullable") is True, field.name
