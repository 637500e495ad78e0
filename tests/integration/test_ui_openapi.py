"""docs/ui-openapi.json against the real server: every operation it documents (GET, PUT,
DELETE) is called on ``opsight ui`` as users start it, over a run store and a trace file;
each answer's status is one the document lists for that operation and its body has the
shape of the schema documented for that status. Each operation is called so that it
succeeds and, where the document lists a refusal, so that it is refused (an unknown run or
row: 404; a missing or bad parameter, a tag or removal asked of a trace file: 400), and the
writes are read back (a tag set and removed, a run removed). The C++ test ``UiServerTest.TheOpenApiFileNamesTheServersRoutes``
checks that the document names exactly the server's routes."""

from __future__ import annotations

import json
import pathlib
import re
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import pytest

SPEC_PATH = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ui-openapi.json"
SPEC = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
METHODS = ("get", "put", "post", "delete", "patch")


# ---- a validator for the part of JSON Schema the document uses ----------------------------

def _resolve(schema: dict) -> dict:
    while "$ref" in schema:
        reference = schema["$ref"]
        assert reference.startswith("#/"), reference
        schema = SPEC
        for part in reference[2:].split("/"):
            schema = schema[part]
    return schema


def schema_problems(value, schema: dict, where: str = "$") -> list[str]:
    """Where ``value`` breaks ``schema`` (OpenAPI 3.0's JSON Schema: $ref, type, nullable,
    enum, properties, required, additionalProperties, items, minItems, maxItems, oneOf,
    anyOf, allOf); an empty list when it fits. ``oneOf`` is taken as "one of them fits"."""
    schema = _resolve(schema)
    if value is None and schema.get("nullable"):
        return []
    problems: list[str] = []
    for part in schema.get("allOf", []):
        problems += schema_problems(value, part, where)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            tried = [schema_problems(value, part, where) for part in schema[key]]
            if all(tried):
                problems.append(f"{where}: fits none of {key} ({min(tried, key=len)})")
    kind = schema.get("type")
    checks = {"object": lambda v: isinstance(v, dict),
              "array": lambda v: isinstance(v, list),
              "string": lambda v: isinstance(v, str),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "boolean": lambda v: isinstance(v, bool)}
    if kind is not None:
        assert kind in checks, f"the validator does not know type {kind!r}"
        if not checks[kind](value):
            return problems + [f"{where}: {type(value).__name__} {value!r:.80} is not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                problems.append(f"{where}: no {name!r}")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                problems += schema_problems(item, properties[name], f"{where}.{name}")
            elif extra is False:
                problems.append(f"{where}: {name!r} is not documented")
            elif isinstance(extra, dict):
                problems += schema_problems(item, extra, f"{where}.{name}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            problems.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where}: more than {schema['maxItems']} items")
        if "items" in schema:
            for index, item in enumerate(value):
                problems += schema_problems(item, schema["items"], f"{where}[{index}]")
    return problems


def test_the_validator_finds_what_does_not_fit():
    error = {"$ref": "#/components/schemas/Error"}
    assert schema_problems({"error": "no run"}, error) == []
    assert schema_problems({"message": "no run"}, error) == ["$: no 'error'"]
    assert schema_problems({"error": 4}, error) == ["$.error: int 4 is not string"]
    assert schema_problems([1, "a"], {"type": "array", "items": {"type": "integer"}}) == [
        "$[1]: str 'a' is not integer"]
    assert schema_problems(None, {"type": "string", "nullable": True}) == []
    assert schema_problems("x", {"oneOf": [{"type": "integer"}, {"type": "array"}]})


# ---- the server ---------------------------------------------------------------------------

class Ui:
    def __init__(self, base: str):
        self.base = base

    def call(self, method: str, path: str, **params) -> tuple[int, str, object]:
        """(status, content type, JSON body) of METHOD path?params."""
        url = self.base + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        # A PUT or POST carries a body, empty here (Content-Length: 0), as a browser's does.
        data = b"" if method in ("PUT", "POST", "PATCH") else None
        request = urllib.request.Request(url, data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, headers, body = response.status, response.headers, response.read()
        except urllib.error.HTTPError as refused:
            status, headers, body = refused.code, refused.headers, refused.read()
        content_type = headers.get("Content-Type", "")
        assert content_type.startswith("application/json"), (method, url, content_type, body)
        return status, content_type, json.loads(body)


@pytest.fixture(scope="module")
def ui(cli_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("openapi")
    env = {"OPSIGHT_HOME": str(folder / "home"), "PATH": "/usr/bin:/bin"}

    def cli(*args):
        done = subprocess.run([str(cli_path), *map(str, args)], capture_output=True, text=True,
                              timeout=120, cwd=folder, env=env)
        assert done.returncode == 0, (args, done.stderr)

    cli("demo", "--quickstart", "-o", folder / "quick", "--iterations", "3")
    store = folder / "runs.db"
    cli("save", folder / "quick.opsight", "--name", "first", "--tag", "team=serving",
        "--store", store)
    cli("save", folder / "quick.opsight", "--name", "second", "--store", store)
    process = subprocess.Popen([str(cli_path), "ui", folder / "quick.opsight", "--store", store,
                                "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        match = re.search(r"serving (http://\S+?)/#", process.stdout.readline())
        assert match, process.stderr.read()
        yield Ui(match.group(1))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()


def _operation(method: str, route: str) -> dict:
    operation = SPEC["paths"].get(route, {}).get(method.lower())
    assert operation is not None, f"{method} {route} is not in docs/ui-openapi.json"
    return operation


def _concrete(route: str, values: dict[str, object]) -> str:
    def fill(match):
        return urllib.parse.quote(str(values[match.group(1)]), safe=":~")
    return re.sub(r"\{(\w+)\}", fill, route)


class Exercise:
    """Calls the documented operations and checks every answer against the document;
    remembers which (method, route) pairs were called and with which statuses."""

    def __init__(self, ui: Ui):
        self.ui = ui
        self.called: dict[tuple[str, str], set[int]] = {}

    def __call__(self, method: str, route: str, expected: int, path_values=None, **params):
        operation = _operation(method, route)
        path = _concrete(route, path_values or {})
        status, _, body = self.ui.call(method, path, **params)
        where = f"{method} {path} {params}"
        assert status == expected, f"{where}: {status} {body}"
        responses = operation["responses"]
        assert str(status) in responses, f"{where}: {status} is not documented ({list(responses)})"
        content = responses[str(status)].get("content", {})
        assert "application/json" in content, f"{where}: {status} documents no JSON body"
        problems = schema_problems(body, content["application/json"]["schema"])
        assert problems == [], f"{where}: the answer does not fit the schema: {problems}"
        self.called.setdefault((method, route), set()).add(status)
        return body


def test_every_documented_operation_answers_as_documented(ui):
    call = Exercise(ui)
    run = {"run": "1"}

    # The store and the files.
    info = call("GET", "/api/info", 200)
    runs = call("GET", "/api/runs", 200)
    assert [entry["name"] for entry in runs["runs"]] == ["second", "first"]
    assert call("GET", "/api/runs", 200, q="serving")["runs"][0]["name"] == "first"
    call("GET", "/api/runs", 400, sort="fastest")
    call("GET", "/api/explain", 200)
    call("GET", "/api/explain", 400, limit="many")
    detail = call("GET", "/api/runs/{run}", 200, run)
    assert detail["id"] == 1
    call("GET", "/api/runs/{run}", 200, {"run": "file:0"})
    call("GET", "/api/runs/{run}", 404, {"run": "nosuchrun"})

    # Reports: every view the server names, on a stored run and on the file.
    views = re.findall(r"\w+", info["report_views"].replace(" or ", ", "))
    assert "summary" in views and "merged_tree" in views
    for view in views:
        extra = {"span": "main"} if view == "breakdown" else {}  # the span of one inference
        body = call("GET", "/api/runs/{run}/report/{view}", 200, {"run": "1", "view": view},
                    **extra)
        if view in ("summary", "merged_tree"):  # the views with a schema of their own
            schema = {"summary": "SummaryReport", "merged_tree": "MergedTree"}[view]
            assert schema_problems(body, {"$ref": f"#/components/schemas/{schema}"}) == []
    summary = call("GET", "/api/runs/{run}/report/{view}", 200, {"run": "file:0", "view": "summary"})
    call("GET", "/api/runs/{run}/report/{view}", 404, {"run": "1", "view": "nosuchview"})
    call("GET", "/api/runs/{run}/report/{view}", 400, {"run": "1", "view": "summary"},
         limit="all")
    call("GET", "/api/runs/{run}/report/{view}", 404, {"run": "nosuchrun", "view": "summary"})
    names = [row["name"] for row in summary]
    inner = next(name for name in names if name != "main")

    # The timeline and what it reads.
    timeline = call("GET", "/api/runs/{run}/timeline", 200, run)
    start, end = timeline["start_ns"], timeline["end_ns"]
    process = timeline["processes"][0]
    track = process["tracks"][0]["id"]
    window = {"start": start, "end": end}
    resolution = max(1, (end - start) // 1000)
    call("GET", "/api/runs/{run}/timeline", 404, {"run": "nosuchrun"})
    tiles = call("GET", "/api/runs/{run}/tiles", 200, run, track=track, resolution=resolution,
                 **window)
    call("GET", "/api/runs/{run}/tiles", 400, run, track=track, **window)  # no resolution
    call("GET", "/api/runs/{run}/tiles", 404, {"run": "nosuchrun"}, track=track,
         resolution=resolution, **window)
    assert tiles, "the run's main thread has slices"
    counter = process["counters"][0]["id"]
    call("GET", "/api/runs/{run}/counters", 200, run, track=counter, resolution=resolution,
         **window)
    call("GET", "/api/runs/{run}/counters", 400, run, track=counter, resolution=0, **window)
    call("GET", "/api/runs/{run}/counters", 404, {"run": "nosuchrun"}, track=counter,
         resolution=resolution, **window)
    call("GET", "/api/runs/{run}/slices/{row}", 200, {"run": "1", "row": 0})
    call("GET", "/api/runs/{run}/slices/{row}", 404, {"run": "1", "row": 10**9})
    call("GET", "/api/runs/{run}/slices/{row}", 404, {"run": "1", "row": "first"})
    call("GET", "/api/runs/{run}/slices/{row}", 404, {"run": "nosuchrun", "row": 0})
    call("GET", "/api/runs/{run}/search", 200, run, q=inner)
    call("GET", "/api/runs/{run}/search", 400, run)  # no q
    call("GET", "/api/runs/{run}/search", 404, {"run": "nosuchrun"}, q=inner)
    for route in ("/api/runs/{run}/range", "/api/runs/{run}/area", "/api/runs/{run}/marks"):
        call("GET", route, 200, run, **window)
        call("GET", route, 400, run, start=end, end=start)  # end before start
        call("GET", route, 404, {"run": "nosuchrun"}, **window)
    call("GET", "/api/runs/{run}/critical_path_slices", 200, run)
    call("GET", "/api/runs/{run}/critical_path_slices", 400, run, limit="all")
    call("GET", "/api/runs/{run}/critical_path_slices", 404, {"run": "nosuchrun"})
    call("GET", "/api/runs/{run}/latency", 200, run, name=inner)
    call("GET", "/api/runs/{run}/latency", 400, run)  # no name
    call("GET", "/api/runs/{run}/latency", 404, {"run": "nosuchrun"}, name=inner)
    call("GET", "/api/runs/{run}/inferences", 200, run, span="main")
    call("GET", "/api/runs/{run}/inferences", 400, run)  # no span
    call("GET", "/api/runs/{run}/inferences", 404, {"run": "nosuchrun"}, span="main")

    # The run's traces: each row opens its root, whose details name the same trace.
    traces = call("GET", "/api/runs/{run}/traces", 200, run)
    assert traces["total"] >= 1 and traces["traces"], traces
    first = traces["traces"][0]
    root = call("GET", "/api/runs/{run}/slices/{row}", 200, {"run": "1", "row": first["root_row"]})
    assert root["trace_id"] == first["trace_id"], (root, first)
    call("GET", "/api/runs/{run}/traces", 200, run, sort="start", order="asc", limit=5, offset=0,
         q=first["root_name"])
    call("GET", "/api/runs/{run}/traces", 400, run, sort="fastest")
    call("GET", "/api/runs/{run}/traces", 404, {"run": "nosuchrun"})

    # Comparing two runs.
    call("GET", "/api/compare", 200, a="1", b="file:0")
    call("GET", "/api/compare", 400, a="1")
    call("GET", "/api/compare", 404, a="1", b="nosuchrun")

    # Writes: a tag set, read back, removed; a run removed. A trace file is not the store's.
    tags = {"run": "1", "key": "owner"}
    tagged = call("PUT", "/api/runs/{run}/tags/{key}", 200, tags, value="inference team")
    assert tagged["tags"]["owner"] == "inference team", tagged
    assert call("GET", "/api/runs", 200, tag="owner=inference team")["runs"][0]["id"] == 1
    call("PUT", "/api/runs/{run}/tags/{key}", 400, {"run": "1", "key": "a=b"})
    call("PUT", "/api/runs/{run}/tags/{key}", 404, {"run": "nosuchrun", "key": "owner"})
    call("PUT", "/api/runs/{run}/tags/{key}", 400, {"run": "file:0", "key": "owner"})
    untagged = call("DELETE", "/api/runs/{run}/tags/{key}", 200, tags)
    assert "owner" not in untagged.get("tags", {}) and untagged["tags"]["team"] == "serving"
    call("DELETE", "/api/runs/{run}/tags/{key}", 404, {"run": "nosuchrun", "key": "owner"})
    call("DELETE", "/api/runs/{run}/tags/{key}", 400, {"run": "file:0", "key": "owner"})
    call("DELETE", "/api/runs/{run}", 400, {"run": "file:0"})
    call("DELETE", "/api/runs/{run}", 200, {"run": "2"})
    call("DELETE", "/api/runs/{run}", 404, {"run": "2"})
    assert [entry["id"] for entry in call("GET", "/api/runs", 200)["runs"]] == [1]
    call("GET", "/api/runs/{run}", 404, {"run": "2"})

    documented = {(method.upper(), route) for route, operations in SPEC["paths"].items()
                  for method in operations if method in METHODS}
    assert set(call.called) == documented, (
        "call every documented operation here (a new route gets its calls in this test): "
        f"not called {sorted(documented - set(call.called))}")
    # Each operation that documents a refusal is refused at least once as well as answered
    # (409, a store that fails to write, is not provoked here).
    assert {operation: statuses for operation, statuses in call.called.items()
            if len(statuses) < 2 and len(_operation(*operation)["responses"]) > 1} == {}
