"""Tests of the targets-file parser (python/opsight/targets.py): every format, every error.

Each error test checks the exact text a user sees, since that text (file, line, entry,
field) is the parser's whole interface for a bad file.
"""

import importlib.util
import json
import pathlib
import pickle
import sys
import textwrap

import pytest

try:
    from opsight import targets
except ImportError:
    # opsight/__init__.py imports the compiled module, which may not be built (or
    # installed) where these tests run; targets.py itself is pure Python, so load it
    # from the source tree by path instead.
    _PATH = pathlib.Path(__file__).resolve().parents[1] / "opsight" / "targets.py"
    _SPEC = importlib.util.spec_from_file_location("opsight_targets_under_test", _PATH)
    targets = importlib.util.module_from_spec(_SPEC)
    sys.modules[_SPEC.name] = targets  # dataclasses look their module up by name
    _SPEC.loader.exec_module(targets)

Target = targets.Target
TargetsError = targets.TargetsError
load_targets = targets.load_targets
parse_targets = targets.parse_targets


def parse(text, filename, **kwargs):
    return parse_targets(textwrap.dedent(text).lstrip("\n"), filename=filename, **kwargs)


def error_of(text, filename, **kwargs):
    with pytest.raises(TargetsError) as caught:
        parse(text, filename, **kwargs)
    return caught.value


def write(directory, name, text):
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


# --- Formats ---------------------------------------------------------------------------

EXPECTED = [
    ("main", None, "main", None, ()),
    ("app.model", "Outer.Inner", "forward", "model forward", ("latency", "memory")),
    ("app.layers", "*Layer", "test_*", None, ()),
]


def summary(found):
    return [(t.module, t.class_name, t.function, t.tag, t.metrics) for t in found]


def test_yaml_list():
    found = parse(
        """
        # what to trace
        - module: main
          function: main
        - module: app.model
          class: Outer.Inner
          function: forward
          tag: model forward
          metrics: [latency, memory]
        - {module: app.layers, class: "*Layer", function: "test_*"}
        """,
        "targets.yaml",
    )
    assert summary(found) == EXPECTED
    assert [(t.line, t.entry) for t in found] == [(2, 1), (4, 2), (9, 3)]
    assert found[1].source == "targets.yaml:4 (entry 2)"
    assert all(t.file == "targets.yaml" for t in found)
    assert [t.has_pattern for t in found] == [False, False, True]
    assert [t.qualname for t in found] == ["main", "Outer.Inner.forward", "*Layer.test_*"]


def test_yaml_mapping_with_version():
    found = parse(
        """
        version: 1
        targets:
          - module: main
            function: main
          - module: app.model
            class: Outer.Inner
            function: forward
            tag: model forward
            metrics:
              - latency
              - memory
          - module: app.layers
            class: "*Layer"
            function: test_*
        """,
        "targets.yml",
    )
    assert summary(found) == EXPECTED
    assert [t.line for t in found] == [3, 5, 12]


def test_yaml_mapping_without_version_and_null_optional_fields():
    found = parse(
        """
        targets:
          - module: main
            class: ""
            function: main
            tag: null
            metrics: []
        """,
        "targets.yaml",
    )
    assert found == [Target("main", "main", file="targets.yaml", line=2, entry=1)]


def test_yaml_anchors_and_merge_keys():
    found = parse(
        """
        targets:
          - &model {module: app.model, function: forward, metrics: [latency]}
          - <<: *model
            function: generate
        """,
        "targets.yaml",
    )
    assert [(t.module, t.function, t.metrics) for t in found] == [
        ("app.model", "forward", ("latency",)),
        ("app.model", "generate", ("latency",)),
    ]


def test_json_list_and_mapping():
    text = """
        [
          {"module": "main", "function": "main"},
          {
            "module": "app.model",
            "class": "Outer.Inner",
            "function": "forward",
            "tag": "model forward",
            "metrics": ["latency", "memory"]
          },
          {"module": "app.layers", "class": "*Layer", "function": "test_*"}
        ]
        """
    found = parse(text, "targets.json")
    assert summary(found) == EXPECTED
    assert [(t.line, t.entry) for t in found] == [(2, 1), (3, 2), (10, 3)]

    wrapped = parse('{"version": 1,\n "targets": [\n  {"module": "m", "function": "f"}]}',
                    "targets.json")
    assert [(t.module, t.function, t.line) for t in wrapped] == [("m", "f", 3)]


def test_csv_with_header_in_any_order():
    found = parse(
        """
        function, module, class, tag, metrics
        main, main, , ,
        # a comment

        forward,app.model,Outer.Inner,model forward,latency;memory
        "test_*",app.layers,*Layer,,
        """,
        "targets.csv",
    )
    assert summary(found) == EXPECTED
    assert [(t.line, t.entry) for t in found] == [(2, 1), (5, 2), (6, 3)]


def test_csv_header_with_only_the_required_columns_and_spaced_metrics():
    found = parse(
        """
        MODULE,Function,metrics
        main,main,"latency  memory;gpu"
        """,
        "targets.csv",
    )
    assert summary(found) == [("main", None, "main", None, ("latency", "memory", "gpu"))]


def test_hiq_headerless_csv_with_comments_and_spaces():
    found = parse(
        """
        # module name, class name, function name, tag name
        "main", "", "main", "main"

        "main", "", "func1", "func1"
          # an indented comment
        "paddleocr", "PaddleOCR", "__call__", "txt_model"
        "PIL.Image", "", "open", ""
        """,
        "hiq.csv",
    )
    assert [(t.module, t.class_name, t.function, t.tag, t.line, t.entry) for t in found] == [
        ("main", None, "main", "main", 2, 1),
        ("main", None, "func1", "func1", 4, 2),
        ("paddleocr", "PaddleOCR", "__call__", "txt_model", 6, 3),
        ("PIL.Image", None, "open", None, 7, 4),
    ]


def test_format_argument_overrides_the_name():
    found = parse('"main", "", "main", "main"\n', "targets.yaml", format="csv")
    assert found[0].function == "main"
    found = parse("- module: m\n  function: f\n", "whatever", format="YML")
    assert found[0].module == "m"


@pytest.mark.parametrize(
    "text",
    [
        '# HiQ style\n"main", "", "main", "main"\n',
        "module,function\nmain,main\n",
        "main, , main, main\n",
        "# comment\n- module: main\n  function: main\n",
        "targets:\n  - module: main\n    function: main\n",
        '[{"module": "main", "function": "main"}]',
        "[{module: main, function: main}]",
    ],
    ids=["hiq", "csv-header", "csv-unquoted", "yaml-list", "yaml-mapping", "json", "yaml-flow"],
)
def test_content_is_sniffed_for_other_names(text):
    found = parse_targets(text, filename="hiq.conf")
    assert [(t.module, t.function) for t in found] == [("main", "main")]


def test_load_targets_reads_files_by_extension(tmp_path):
    yaml_path = write(tmp_path, "t.YAML", "- module: main\n  function: main\n")
    json_path = write(tmp_path, "t.json", '[{"module": "main", "function": "main"}]')
    csv_path = write(tmp_path, "t.csv", "module,function\nmain,main\n")
    conf_path = write(tmp_path, "hiq.conf", '"main", "", "main", "main"\n')
    for path, line in ((yaml_path, 1), (json_path, 1), (csv_path, 2), (conf_path, 1)):
        (found,) = load_targets(path)
        assert (found.module, found.function, found.line) == ("main", "main", line)
        assert found.file == str(path)
    (found,) = load_targets(str(csv_path))
    assert found.source == f"{csv_path}:2 (entry 1)"


def test_load_targets_accepts_byte_order_mark_and_crlf(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_bytes(b"\xef\xbb\xbf# c\r\n- module: main\r\n  function: main\r\n")
    (found,) = load_targets(path)
    assert (found.module, found.line) == ("main", 2)


def test_target_is_frozen_and_hashable():
    target = Target("m", "f")
    with pytest.raises(AttributeError):
        target.module = "other"
    assert {target: 1}[Target("m", "f")] == 1
    assert target.source == "<string>:0 (entry 0)"
    assert not target.has_pattern
    assert Target("m", "f", class_name="A[bc]").has_pattern
    assert Target("m", "get?").has_pattern


# --- Errors ----------------------------------------------------------------------------


def check(error, text, *, line, field=None, entry=None, column=None):
    assert str(error) == text
    assert (error.line, error.field, error.entry, error.column) == (line, field, entry, column)
    assert isinstance(error, ValueError)


def test_error_missing_field_yaml():
    error = error_of(
        """
        - module: main
          function: main
        - module: main
          tag: no function
        """,
        "targets.yaml",
    )
    check(
        error,
        "targets.yaml:3: entry 2: field 'function': missing; every entry needs "
        "'module' and 'function'",
        line=3, field="function", entry=2,
    )
    assert error.file == "targets.yaml"
    assert error.message == "missing; every entry needs 'module' and 'function'"


def test_error_unknown_key_names_the_key_and_suggests():
    error = error_of(
        """
        version: 1
        targets:
          - module: main
            fucntion: main
        """,
        "targets.yaml",
    )
    check(
        error,
        "targets.yaml:4: entry 1: field 'fucntion': unknown key (did you mean "
        "'function'?); expected one of 'module', 'class', 'function', 'tag', 'metrics'",
        line=4, field="fucntion", entry=1,
    )


def test_error_wrong_type_yaml():
    error = error_of(
        """
        - module: main
          function: main
        - module: main
          function: ok
        - module: main


          function: 3
        """,
        "targets.yaml",
    )
    check(error, "targets.yaml:8: entry 3: field 'function': expected a string, got int",
          line=8, field="function", entry=3)


@pytest.mark.parametrize(
    "word, kind", [("on", "bool"), ("yes", "bool"), ("null", "null"), ("off", "bool")]
)
def test_error_yaml_word_read_as_another_type_suggests_quotes(word, kind):
    error = error_of(f"- module: app\n  function: {word}\n", "t.yaml")
    check(error, f"t.yaml:2: entry 1: field 'function': expected a string, got {kind} "
                 f"(YAML reads an unquoted {word} as {kind}; write '{word}')",
          line=2, field="function",
          entry=1)
    (quoted,) = parse(f"- module: app\n  function: '{word}'\n", "t.yaml")
    assert quoted.function == word


def test_error_wrong_type_json_points_at_the_field():
    error = error_of(
        """
        [
          {"module": "main", "function": "main"},
          {"module": "main",
           "function": 3}
        ]
        """,
        "targets.json",
    )
    check(error, "targets.json:4: entry 2: field 'function': expected a string, got int",
          line=4, field="function", entry=2)


@pytest.mark.parametrize(
    "entry, line, field, message",
    [
        ('{"module": "a", "function": "f", "tag": ""}', 1, "tag",
         "expected a non-empty string"),
        ('{"module": "a", "function": "f", "tag": 5}', 1, "tag", "expected a string, got int"),
        ('{"module": "a", "function": "f", "class": true}', 1, "class",
         "expected a string, got bool"),
        ('{"module": ["a"], "function": "f"}', 1, "module", "expected a string, got list"),
        ('{"module": "a", "function": null}', 1, "function", "expected a string, got null"),
        ('{"module": "a", "function": "f", "metrics": "latency"}', 1, "metrics",
         "expected a list of strings, got str"),
        ('{"module": "a", "function": "f", "metrics": ["latency",\n 7]}', 2, "metrics",
         "item 2: expected a string, got int"),
        ('{"module": "a", "function": "f", "metrics": [""]}', 1, "metrics",
         "item 1: expected a non-empty string"),
        ('{"module": "a", "function": "f", "metrics": ["a b"]}', 1, "metrics",
         "item 1: 'a b' is not a metric name (no spaces, ';' or ',')"),
        ('{"module": "a", "function": "f", "metrics": ["cpu", "cpu"]}', 1, "metrics",
         "item 2: metric 'cpu' is listed twice"),
        ('{"module": "a", "function": "f", "metrics": ["latency", "memroy"]}', 1, "metrics",
         "item 2: unknown metric 'memroy' (did you mean 'memory'?); expected one of latency, "
         "cpu, memory, heap, disk, network, gpu"),
        ('{"module": "a", "function": "f", "function": "g"}', 1, "function",
         "given twice (first at line 1)"),
    ],
)
def test_error_field_types_json(entry, line, field, message):
    error = error_of("[" + entry + "]", "t.json")
    check(error, f"t.json:{line}: entry 1: field '{field}': {message}",
          line=line, field=field, entry=1)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("module", "my-app", "'my-app' is not a dotted module name: 'my-app' is not a "
                             "Python identifier"),
        ("module", "app..model", "'app..model' is not a dotted module name (empty part)"),
        ("module", "app.class", "'app.class' is not a dotted module name: 'class' is a "
                                "Python keyword, not a module name"),
        ("module", "app.*", "'app.*': a module cannot be a glob pattern; name one module"),
        ("class", "Outer.", "'Outer.' is not a (dotted) class name (empty part)"),
        ("class", "Outer.In-ner", "'Outer.In-ner' is not a dotted class name: 'In-ner' is "
                                  "not a Python identifier"),
        ("class", "[A-Z*", "'[A-Z*' has a '[' without its ']'"),
        ("class", "A[]", "'A[]' has an empty '[]' set"),
        ("class", "A[.,]", "'A[.,]' is not a dotted class name: 'A[' has a '[' without "
                           "its ']'"),
        ("function", "Model.forward", "'Model.forward' is not a function name; put the "
                                      "class in 'class' ('Model') and the function in "
                                      "'function' ('forward')"),
        ("function", "run now", "'run now' is not a Python identifier"),
        ("function", "def", "'def' is a Python keyword, not a function name"),
        ("function", "test_*+", "'test_*+' is not a Python identifier or glob pattern "
                                "(unexpected '+')"),
        ("tag", "two\nlines", "'two\\nlines' holds a line break or control character"),
        ("tag", "   ", "expected a non-empty string"),
    ],
)
def test_error_bad_names(field, value, message):
    entry = {"module": "app", "function": "f", field: value}
    text = "- " + "\n  ".join(f"{key}: {_yaml_quote(val)}" for key, val in entry.items())
    line = 1 + list(entry).index(field)
    error = error_of(text, "t.yaml")
    check(error, f"t.yaml:{line}: entry 1: field '{field}': {message}",
          line=line, field=field, entry=1)


def _yaml_quote(value):
    return json.dumps(value)  # a JSON string is a YAML double-quoted scalar


def test_valid_patterns():
    found = parse(
        """
        - {module: a, class: "[A-Z]*Layer", function: "[!_]*"}
        - {module: a, class: "Outer.*", function: "get_?"}
        - {module: a, class: "*", function: "*"}
        - {module: a, function: "[a-z0-9_]*"}
        """,
        "t.yaml",
    )
    assert all(t.has_pattern for t in found)


def test_error_bad_yaml_syntax_has_line_and_column():
    error = error_of(
        """
        - module: main
          function: [main
        - module: other
        """,
        "targets.yaml",
    )
    check(
        error,
        "targets.yaml:3:9: YAML syntax error: expected ',' or ']', but got ':' (while "
        "parsing a flow sequence at line 2, column 13)",
        line=3, column=9,
    )


def test_error_bad_yaml_indentation():
    error = error_of("- module: main\n function: main\n", "targets.yaml")
    assert (error.line, error.column) == (2, 2)
    assert str(error).startswith("targets.yaml:2:2: YAML syntax error: ")


def test_error_yaml_with_two_documents():
    error = error_of("- {module: a, function: f}\n---\n- {module: b, function: f}\n",
                     "t.yaml")
    check(error, "t.yaml:2:1: YAML syntax error: found another document (expected a "
                 "single document in the stream at line 1, column 1)", line=2, column=1)


def test_error_yaml_unsafe_tag():
    error = error_of("- module: a\n  function: !!python/name:os.system f\n", "t.yaml")
    check(error, "t.yaml:2:13: YAML error: could not determine a constructor for the tag "
                 "'tag:yaml.org,2002:python/name:os.system'", line=2, column=13)


def test_error_bad_json_syntax_has_line_and_column():
    error = error_of(
        """
        [
          {"module": "main", "function": "main"},
          {"module": "main"
           "function": "other"}
        ]
        """,
        "targets.json",
    )
    check(error, "targets.json:4:4: JSON syntax error: Expecting ',' delimiter",
          line=4, column=4)


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("t.yaml", "", "t.yaml: no targets: the file is empty"),
        ("t.json", "  \n", "t.json: no targets: the file is empty"),
        ("t.csv", "", "t.csv: no targets: the file is empty"),
        ("t.yaml", "# nothing yet\n", "t.yaml: no targets: the file holds no entries"),
        ("t.yaml", "[]\n", "t.yaml:1: no targets: the list of entries is empty"),
        ("t.json", '{"targets": []}', "t.json:1: no targets: the list of entries is empty"),
        ("t.yaml", "version: 1\ntargets:\n", "t.yaml:2: no targets: 'targets' is empty"),
        ("t.csv", "# c\n\n", "t.csv: no targets: the file has no rows"),
        ("t.csv", "# c\nmodule,function\n",
         "t.csv:2: no targets: the file has a header row but no rows"),
        ("t.conf", "# only comments\n", "t.conf: no targets: the file holds no entries"),
    ],
)
def test_error_empty(name, text, message):
    with pytest.raises(TargetsError) as caught:
        parse_targets(text, filename=name)
    assert str(caught.value) == message
    assert caught.value.message.startswith("no targets")


def test_error_duplicate_names_both_lines():
    error = error_of(
        """
        - module: app
          class: Model
          function: forward
        - module: app
          function: forward
        - module: app
          class: Model
          function: forward
        """,
        "targets.yaml",
    )
    check(error, "targets.yaml:6: entry 3: duplicate of entry 1 (line 1): module 'app', "
                 "class 'Model', function 'forward'", line=6, entry=3)


def test_error_duplicate_in_hiq_csv():
    error = error_of('"main", "", "main", "a"\n# c\n"main", "", "main", "b"\n', "hiq.csv")
    check(error, "hiq.csv:3: entry 2: duplicate of entry 1 (line 1): module 'main', "
                 "function 'main'", line=3, entry=2)


@pytest.mark.parametrize(
    "name, text",
    [
        ("targets.txt", "trace main and func1 please\n"),
        ("targets.toml", '[[targets]]\nmodule = "main"\n'),
    ],
)
def test_error_unknown_extension_and_content(name, text):
    with pytest.raises(TargetsError) as caught:
        parse_targets(text, filename=name)
    error = caught.value
    assert error.file == name and error.line is None
    assert str(error).startswith(f"{name}: cannot tell the format of this targets file (")
    assert str(error).endswith("); name it .yaml, .yml, .json or .csv")


def test_error_unknown_extension_from_a_file(tmp_path):
    path = write(tmp_path, "targets.txt", "trace main\n")
    with pytest.raises(TargetsError, match=r"targets\.txt: cannot tell the format"):
        load_targets(path)


def test_error_unknown_format_argument():
    with pytest.raises(TargetsError) as caught:
        parse_targets("- {module: a, function: f}", format="toml")
    assert str(caught.value) == (
        "<string>: unknown format 'toml'; expected one of 'yaml', 'json', 'csv'"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("tragets: []\n",
         "t.yaml:1: field 'tragets': unknown top-level key (did you mean 'targets'?); "
         "expected one of 'targets', 'version', 'export'"),
        ("module: main\nfunction: main\n",
         "t.yaml:1: field 'module': unknown top-level key; expected one of 'targets', "
         "'version', 'export' (a single entry must still be in a list: '- module: ...')"),
        ("version: 1\n", "t.yaml:1: missing top-level key 'targets'"),
        ("version: 2\ntargets: []\n",
         "t.yaml:1: field 'version': unsupported version 2; this opsight reads version 1"),
        ("version: '1'\ntargets: []\n",
         "t.yaml:1: field 'version': expected an integer, got str"),
        ("targets: {module: a}\n",
         "t.yaml:1: field 'targets': expected a list of entries, got mapping"),
        ("just a string\n",
         "t.yaml:1: expected a list of entries or a mapping with 'targets', got str"),
        ("- main.func1\n",
         "t.yaml:1: entry 1: expected a mapping with 'module' and 'function', got str"),
        ("- module: a\n  function: f\n  3: x\n",
         "t.yaml:3: entry 1: keys must be strings, got int (3)"),
    ],
)
def test_error_structure(text, message):
    error = error_of(text, "t.yaml")
    assert str(error) == message


@pytest.mark.parametrize(
    "text, message",
    [
        ('"main", "", "main"\n',
         "t.csv:1: entry 1: expected 4 cells (module, class, function, tag) in a row "
         "without a header, got 3; or start the file with a header row such as "
         "'module,class,function,tag'"),
        ("module,fucntion\nmain,main\n",
         "t.csv:1: field 'fucntion': unknown column in the header row (did you mean "
         "'function'?); expected one of 'module', 'class', 'function', 'tag', 'metrics'"),
        ("module,class\nmain,A\n",
         "t.csv:1: field 'function': missing column in the header row; 'module' and "
         "'function' are required"),
        ("module,function,module\na,f,b\n",
         "t.csv:1: field 'module': column named twice in the header row"),
        ("module,function\na,f\n\n# c\na,g,h\n",
         "t.csv:5: entry 2: expected 2 cells as in the header row (line 1), got 3"),
        ("module,function,class\na,,B\n",
         "t.csv:2: entry 1: field 'function': missing (the cell is empty)"),
        ('"a", "", "f", "t"\n"", "", "g", "t"\n',
         "t.csv:2: entry 2: field 'module': missing (the cell is empty)"),
        ('"a", "Foo-Bar", "f", "t"\n',
         "t.csv:1: entry 1: field 'class': 'Foo-Bar' is not a Python identifier"),
        ("module,function,metrics\na,f,\"x,y\"\n",
         "t.csv:2: entry 1: field 'metrics': 'x,y' is not a metric name (no spaces, ';' "
         "or ',')"),
        ('module,function\n"a,f\n', "t.csv:2: CSV syntax error: unexpected end of data"),
        ('"a" , "", "f", "t"\n', "t.csv:1: CSV syntax error: ',' expected after '\"'"),
    ],
)
def test_error_csv(text, message):
    error = error_of(text, "t.csv")
    assert str(error) == message


def test_error_not_utf8(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_bytes(b"- module: main\n  function: caf\xe9\n")
    with pytest.raises(TargetsError) as caught:
        load_targets(path)
    assert str(caught.value) == f"{path}:2: not UTF-8 text (byte 0xe9 at offset 30)"


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_targets(tmp_path / "absent.yaml")


def test_error_keeps_its_attributes_through_pickle():
    error = error_of("- module: main\n  function: 3\n", "t.yaml")
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error)
    assert (copy.file, copy.line, copy.field, copy.entry, copy.message) == (
        "t.yaml", 2, "function", 1, "expected a string, got int")


# --- The export: section ---------------------------------------------------------------

def test_the_export_section_as_a_list_or_a_mapping(tmp_path):
    as_list = write(tmp_path, "list.yaml", """
        targets:
          - {module: main, function: main}
        export:
          - otlp=http://127.0.0.1:4318
          - "kafka=k1:9092,k2:9092?topic=spans"
          - zipkin
    """)
    assert targets.load_export_targets(as_list) == [
        "otlp=http://127.0.0.1:4318", "kafka=k1:9092,k2:9092?topic=spans", "zipkin"]
    as_mapping = write(tmp_path, "mapping.yaml", """
        targets:
          - {module: main, function: main}
        export:
          otlp: http://127.0.0.1:4318
          prometheus: ":9464"
          zipkin:
    """)
    assert targets.load_export_targets(as_mapping) == [
        "otlp=http://127.0.0.1:4318", "prometheus=:9464", "zipkin"]
    assert [t.function for t in load_targets(as_mapping)] == ["main"]  # targets unchanged
    as_json = write(tmp_path, "t.json", """
        {"targets": [{"module": "main", "function": "main"}],
         "export": {"loki": "http://127.0.0.1:3100"}}
    """)
    assert targets.load_export_targets(as_json) == ["loki=http://127.0.0.1:3100"]
    none = write(tmp_path, "none.yaml", "targets:\n  - {module: main, function: main}\n")
    assert targets.load_export_targets(none) == []
    csv_file = write(tmp_path, "t.csv", "module,function\nmain,main\n")
    assert targets.load_export_targets(csv_file) == []


@pytest.mark.parametrize("section, line, words", [
    ("export:\n  - grpc=http://x:4317\n", 3, "unknown export kind 'grpc'"),
    ("export:\n  jaeger: http://x\n", 3, "unknown export kind 'jaeger'"),
    ("export:\n  - 42\n", 3, "expected a target such as otlp="),
    ("export:\n  otlp: [a, b]\n", 3, "expected a URL"),
    ("export: otlp\n", 2, "expected a list of targets"),
])
def test_a_bad_export_section_names_its_line(tmp_path, section, line, words):
    path = write(tmp_path, "bad.yaml", "targets: [{module: main, function: main}]\n" + section)
    with pytest.raises(TargetsError) as caught:
        targets.load_export_targets(path)
    assert caught.value.line == line and words in str(caught.value), str(caught.value)
    assert f"bad.yaml:{line}" in str(caught.value) and "export" in str(caught.value)
