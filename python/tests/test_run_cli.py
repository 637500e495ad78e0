"""``opsight run`` end to end: real programs in subprocesses, traced without changing them."""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import OPSIGHT, PYTHON, opsight_run, run, spans_of, write

APP = """
    import os
    import sys

    import helper

    def work(n):
        return helper.compute(n)

    class Service:
        def handle(self, n):
            return work(n) + work(n + 1)

        class Inner:
            @staticmethod
            def ping():
                return "pong"

    def main():
        result = Service().handle(2)
        print("result", result, Service.Inner.ping(), sys.argv[1:], __name__,
              os.path.isabs(__file__))
        sys.stdout.flush()
        code = int(sys.argv[1]) if len(sys.argv) > 1 else 0
        if code:
            sys.exit(code)

    if __name__ == "__main__":
        main()
"""

HELPER = """
    def compute(n):
        return n * 10

    def unused():
        pass
"""

TARGETS = """
    targets:
      - {module: app, function: work}
      - {module: __main__, class: Service, function: handle}
      - {module: app, class: Service.Inner, function: ping, tag: "inner ping"}
      - {module: app, function: main}
      - {module: helper, function: compute}
"""


@pytest.fixture
def program(tmp_path):
    write(tmp_path, "app.py", APP)
    write(tmp_path, "helper.py", HELPER)
    write(tmp_path, "targets.yaml", TARGETS)
    return tmp_path


def test_tree_summary_and_trace(program):
    completed = opsight_run(["-c", "targets.yaml", "-o", "out.opsight", "--", "python",
                             "app.py"], program)
    assert completed.returncode == 0, completed.stderr
    # the program's own output is untouched, on stdout; the reports go to stderr
    assert completed.stdout == "result 50 pong [] __main__ True\n"
    report = completed.stderr
    assert "opsight tree: out.opsight, 7 slices" in report
    assert "opsight summary: out.opsight" in report
    assert "tracer overhead:" in report
    tree = report[report.index("opsight tree"):report.index("opsight summary")]
    for line in ("main ", "├─ Service.handle", "│  ├─ work", "│  │  └─ compute",
                 "└─ inner ping"):
        assert line in tree, line
    assert "wrote out.opsight (7 spans, 1 process)" in report

    frame = spans_of(program / "out.opsight")
    assert sorted(frame["name"]) == sorted(["main", "Service.handle", "work", "work", "compute",
                                            "compute", "inner ping"])
    spans = frame.set_index("span_id")
    computes = frame[frame["name"] == "compute"]
    assert (spans.loc[computes["parent_span_id"], "name"] == "work").all()


def test_chrome_json_output(program):
    completed = opsight_run(["-c", "targets.yaml", "-o", "out.json", "--report", "none", "--",
                             "python", "app.py"], program)
    assert completed.returncode == 0, completed.stderr
    assert "opsight tree" not in completed.stderr
    events = json.loads((program / "out.json").read_text())["traceEvents"]
    assert sum(event.get("name") == "work" for event in events) == 2


def test_report_choice_and_format(program):
    completed = opsight_run(["-c", "targets.yaml", "--report", "summary", "--format", "json",
                             "-o", "x.opsight", "--", "python", "app.py"], program)
    assert completed.returncode == 0, completed.stderr
    body = completed.stderr[:completed.stderr.rindex("]") + 1]
    rows = json.loads(body)
    assert {row["name"]: row["count"] for row in rows} == {
        "main": 1, "Service.handle": 1, "work": 2, "compute": 2, "inner ping": 1}

    completed = opsight_run(["-c", "targets.yaml", "--report", "table", "-o", "x.opsight",
                             "--", "python", "app.py"], program)
    assert "opsight table:" in completed.stderr and "opsight tree" not in completed.stderr

    completed = opsight_run(["--report", "flame", "--", "python", "app.py"], program)
    assert completed.returncode == 64
    assert "unknown report 'flame'" in completed.stderr


@pytest.mark.parametrize("code", [0, 3, 42])
def test_exit_status_passes_through(program, code):
    completed = opsight_run(["-c", "targets.yaml", "-o", "x.opsight", "--", "python", "app.py",
                             str(code)], program)
    assert completed.returncode == code
    assert f"result 50 pong ['{code}']" in completed.stdout
    assert "opsight tree" in completed.stderr  # reported even when the program failed


def test_uncaught_exception_as_untraced(program):
    write(program, "crash.py", """
        import helper

        def fail():
            raise RuntimeError("it broke")

        helper.compute(1)
        fail()
    """)
    plain = run([PYTHON, "crash.py"], program)
    traced = opsight_run(["-c", "targets.yaml", "-o", "x.opsight", "--report", "none", "--",
                          "python", "crash.py"], program)
    assert plain.returncode == traced.returncode == 1
    # the same traceback, starting in the program, not in opsight's runner
    assert traced.stderr.startswith(plain.stderr), traced.stderr
    assert "_script.py" not in traced.stderr and "runpy" not in traced.stderr


@pytest.mark.parametrize("name, text", [
    ("syntax.py", "x = (\n"),
    ("chained.py", """
        def load():
            try:
                {}["model"]
            except KeyError as error:
                raise RuntimeError("cannot load") from error
        load()
    """),
])
def test_errors_read_as_untraced(program, name, text):
    write(program, name, text)
    plain = run([PYTHON, name], program)
    traced = opsight_run(["-o", "x.opsight", "--report", "none", "--", "python", name], program)
    assert plain.returncode == traced.returncode == 1
    assert traced.stderr.startswith(plain.stderr), traced.stderr


def test_missing_script_or_module_as_python_says(program):
    plain = run([PYTHON, "absent.py"], program)
    traced = opsight_run(["--report", "none", "--", "python", "absent.py"], program)
    assert plain.returncode == traced.returncode == 2
    assert f"can't open file '{program / 'absent.py'}': [Errno 2]" in traced.stderr
    assert "Traceback" not in traced.stderr
    traced = opsight_run(["--report", "none", "--", "python", "-m", "absent_module"], program)
    assert traced.returncode == 1
    assert ": No module named absent_module\n" in traced.stderr
    assert "Traceback" not in traced.stderr


def test_killed_program(program):
    write(program, "killed.py", """
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    completed = opsight_run(["-o", "x.opsight", "--report", "none", "--", "python",
                             "killed.py"], program)
    assert completed.returncode == 128 + 9


def test_unresolved_targets_are_reported_with_file_line_entry(program):
    write(program, "partial.yaml", """
        targets:
          - {module: helper, function: compute}
          - {module: helper, function: missing_function}
          - {module: app, class: NoSuchClass, function: run}
          - {module: never.imported, function: f}
    """)
    completed = opsight_run(["-c", "partial.yaml", "-o", "x.opsight", "--", "python", "app.py"],
                            program)
    assert completed.returncode == 0
    path = program / "partial.yaml"
    lines = [line for line in completed.stderr.splitlines() if "never resolved" in line]
    assert lines == [
        f"opsight: target never resolved: {path}:3 (entry 2): 'missing_function' not found in "
        "module 'helper'",
        f"opsight: target never resolved: {path}:4 (entry 3): class 'NoSuchClass' not found in "
        "module '__main__'",
        f"opsight: target never resolved: {path}:5 (entry 4): module 'never.imported' was never "
        "imported",
    ]


def test_strict_fails_before_the_program_starts(program):
    write(program, "marker_app.py", """
        import pathlib
        pathlib.Path("started").write_text("yes")
        def main():
            pass
    """)
    write(program, "strict.yaml", """
        - {module: marker_app, function: main}
        - {module: helper, function: absent}
        - {module: marker_app, class: Missing, function: x}
    """)
    completed = opsight_run(["-c", "strict.yaml", "--strict", "--", "python", "marker_app.py"],
                            program)
    assert completed.returncode == 1
    assert not (program / "started").exists()
    path = program / "strict.yaml"
    assert (f"target does not resolve: {path}:2 (entry 2): 'absent' not found in module "
            "'helper'") in completed.stderr
    assert f"{path}:3 (entry 3): class 'Missing' is not defined in" in completed.stderr
    assert "--strict: not starting the program" in completed.stderr


def test_strict_passes_when_every_target_resolves(program):
    completed = opsight_run(["-c", "targets.yaml", "--strict", "-o", "x.opsight", "--",
                             "python", "app.py"], program)
    assert completed.returncode == 0, completed.stderr
    assert "result 50" in completed.stdout


@pytest.mark.parametrize("text, where", [
    ("targets:\n  - {module: app, function: work}\n  - {module: app, function: 12}\n",
     ":3: entry 2: field 'function': expected a string, got int"),
    ("targets:\n  - {module: app}\n", ":2: entry 1: field 'function':"),
    ("targets:\n  - {module: app, function: work\n", ":3"),
])
def test_malformed_targets_file_fails_at_once(program, text, where):
    (program / "bad.yaml").write_text(text)
    completed = opsight_run(["-c", "bad.yaml", "--", "python", "app.py"], program)
    assert completed.returncode == 1
    assert completed.stdout == ""  # the program never ran
    assert completed.stderr.startswith(f"opsight run: {program / 'bad.yaml'}{where}"), \
        completed.stderr


def test_missing_targets_file(program):
    completed = opsight_run(["-c", "nowhere.yaml", "--", "python", "app.py"], program)
    assert completed.returncode == 1
    assert "nowhere.yaml" in completed.stderr and completed.stdout == ""


def test_python_dash_m_opsight_run_form(program):
    completed = run([PYTHON, "-m", "opsight", "run", "-c", "targets.yaml", "-o", "m.opsight",
                     "app.py", "5"], program)
    assert completed.returncode == 5
    assert "result 50 pong ['5']" in completed.stdout
    assert "wrote m.opsight (7 spans, 1 process)" in completed.stderr
    assert len(spans_of(program / "m.opsight")) == 7


def test_script_without_python_prefix_and_script_path_from_elsewhere(program, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    completed = opsight_run(["-c", str(program / "targets.yaml"), "-o", "x.opsight", "--",
                             str(program / "app.py"), "7"], elsewhere)
    assert completed.returncode == 7, completed.stderr
    assert "result 50" in completed.stdout
    assert len(spans_of(elsewhere / "x.opsight")) == 7


def test_python_dash_m_module_targets(program):
    write(program, "service/__init__.py", "")
    write(program, "service/__main__.py", """
        from service import core

        def serve():
            return core.answer()

        print("served", serve())
    """)
    write(program, "service/core.py", """
        def answer():
            return 42
    """)
    write(program, "module.yaml", """
        - {module: service.core, function: answer}
        - {module: service.__main__, function: serve}
        - {module: app, function: work}
    """)
    completed = opsight_run(["-c", "module.yaml", "-o", "x.opsight", "--", "python", "-m",
                             "service"], program)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "served 42\n"
    frame = spans_of(program / "x.opsight")
    assert sorted(frame["name"]) == ["answer", "serve"]
    completed = opsight_run(["-c", "module.yaml", "-o", "x.opsight", "--", "python", "-m",
                             "app", "0"], program)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("result 50")
    assert list(spans_of(program / "x.opsight")["name"]) == ["work", "work"]


@pytest.mark.parametrize("name, text", [
    ("targets.json", '[{"module": "app", "function": "work"}, '
                     '{"module": "helper", "function": "compute", "tag": "c"}]'),
    ("targets.csv", "module,class,function,tag\napp,,work,\nhelper,,compute,c\n"),
    ("targets.txt", '# HiQ\n"app", "", "work", ""\n"helper", "", "compute", "c"\n'),
])
def test_each_targets_format(program, name, text):
    (program / name).write_text(text)
    completed = opsight_run(["-c", name, "-o", "x.opsight", "--report", "none", "--", "python",
                             "app.py"], program)
    assert completed.returncode == 0, completed.stderr
    assert sorted(spans_of(program / "x.opsight")["name"]) == ["c", "c", "work", "work"]


def test_usage_errors(program):
    assert opsight_run([], program).returncode == 64
    missing = opsight_run(["--", "./no-such-program"], program)
    assert missing.returncode == 127 and "cannot start" in missing.stderr


def test_a_program_that_is_not_python(program):
    completed = opsight_run(["--", "sh", "-c", "exit 4"], program)
    assert completed.returncode == 4
    assert "recorded nothing" in completed.stderr


def test_quick_start_example():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    example = os.path.join(root, "examples", "python", "quick_start")
    assert os.path.isdir(example), f"{example} is missing (the README's quick start runs it)"
    import tempfile
    with tempfile.TemporaryDirectory() as directory:
        completed = run([OPSIGHT, "run", "-c", os.path.join(example, "targets.yaml"), "-o",
                         "qs.opsight", "--", "python", os.path.join(example, "main.py")],
                        cwd=directory)
    assert completed.returncode == 0, completed.stderr
    tree = completed.stderr
    assert "main " in tree and "├─ func1" in tree and "└─ func2 (sleeps 150 ms)" in tree
    assert tree.count("func2 (sleeps 150 ms)") >= 3  # twice in the tree, once in the summary
    assert "tracer overhead" in tree


def test_opsight_command_delegates_to_the_core(program):
    completed = run([OPSIGHT, "--version"], program)
    assert completed.returncode == 0 and completed.stdout.strip()
    help_text = run([OPSIGHT, "--help"], program)
    assert "run" in help_text.stdout and "ctl" in help_text.stdout
    assert sys.executable  # the suite runs in the interpreter opsight is installed in


def test_main_script_patterns_blocks_and_tasks(tmp_path):
    write(tmp_path, "app.py", """
        import asyncio

        class AHandler:
            def handle(self):
                return "a"

        class BHandler(AHandler):
            def handle(self):
                return "b" + super().handle()

        def step_one():
            return 1

        def step_two():
            return 2

        def other():
            return 0

        async def fetch():
            await asyncio.sleep(0)
            return step_one()

        try:
            import no_such_module_here
        except ImportError:
            def fallback():
                return "fallback"

        if __name__ == "__main__":
            def inner_main():
                return [AHandler().handle(), BHandler().handle(), step_one(), step_two(),
                        other(), asyncio.run(fetch()), fallback()]

            print(inner_main())
    """)
    write(tmp_path, "targets.yaml", """
        - {module: __main__, class: "*Handler", function: handle}
        - {module: app, function: "step_*"}
        - {module: app, function: fetch}
        - {module: app, function: fallback}
        - {module: app, function: inner_main}
    """)
    completed = opsight_run(["-c", "targets.yaml", "--strict", "--report", "tree", "-o",
                             "x.opsight", "--", "python", "app.py"], tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "['a', 'ba', 1, 2, 0, 1, 'fallback']\n"
    tree = completed.stderr
    assert "│  └─ AHandler.handle" in tree  # called by BHandler.handle through super()
    assert "fetch [asyncio Task-1 (fetch)]" in tree
    frame = spans_of(tmp_path / "x.opsight")
    assert sorted(frame["name"]) == sorted([
        "inner_main", "AHandler.handle", "BHandler.handle", "AHandler.handle", "step_one",
        "step_two", "fallback", "fetch", "step_one"])


def test_an_unwritable_output_is_refused_before_the_program_starts(program):
    write(program, "marker.py", """
        open("started", "w").close()
    """)
    for output, problem in ((program / "no-such-folder" / "trace.opsight", "no such folder"),
                            (program / "trace.txt", "unknown trace format")):
        completed = opsight_run(["-o", str(output), "--", "python", "marker.py"], program)
        assert completed.returncode == 64, completed.stderr
        assert f"opsight run: -o {output}: {problem}" in completed.stderr
        assert "the program was not started" in completed.stderr
        assert not (program / "started").exists()


def test_a_trace_that_cannot_be_written_is_kept_and_the_run_still_stored(program, tmp_path):
    """The program removes the output's folder while it runs: the write fails at the end;
    the processes' traces stay where opsight says, and the run is in the store."""
    output_folder = program / "out"
    output_folder.mkdir()
    write(program, "remover.py", """
        import shutil
        import helper
        helper.compute(3)
        shutil.rmtree("out")
    """)
    write(program, "helper_targets.yaml", "targets:\n  - {module: helper, function: compute}\n")
    completed = opsight_run(["-c", "helper_targets.yaml", "-o", str(output_folder / "t.opsight"),
                             "--name", "kept-run", "--", "python", "remover.py"], program)
    assert completed.returncode == 1, completed.stderr
    assert "opsight run: saved as run" in completed.stderr
    kept_line = [line for line in completed.stderr.splitlines()
                 if "the processes' traces are kept in" in line]
    assert len(kept_line) == 1, completed.stderr
    kept = kept_line[0].split("kept in ", 1)[1].split(" ", 1)[0]
    files = [name for name in os.listdir(kept) if name.startswith("trace.")]
    assert files, kept
    assert list(spans_of(os.path.join(kept, files[0]))["name"]) == ["compute"]
    shown = run([OPSIGHT, "show", "kept-run", "--format", "json"], program)
    assert shown.returncode == 0, shown.stderr
    import shutil
    shutil.rmtree(kept)


def test_an_unknown_command_is_a_usage_error_even_with_help(program):
    for arguments in (["nosuch", "--help"], ["nosuch"]):
        completed = run([OPSIGHT, *arguments], program)
        assert completed.returncode == 64, completed.stderr
        assert "opsight: unknown command 'nosuch'" in completed.stderr
        for command in ("run", "ctl", "bench", "compare-backends", "report"):
            assert f"  {command}" in completed.stderr


@pytest.mark.parametrize("arguments", [["run", "--no-such-flag", "--", "python", "x.py"],
                                       ["ctl", "--no-such-flag", "1"]])
def test_an_unknown_flag_exits_64_as_every_usage_error(program, arguments):
    completed = run([OPSIGHT, *arguments], program)
    assert completed.returncode == 64, completed.stderr
    assert "unrecognized arguments: --no-such-flag" in completed.stderr


@pytest.mark.parametrize("pid", ["99999999999", "0", "-3", "x"])
def test_ctl_refuses_what_is_not_a_process_id(program, pid):
    completed = run([OPSIGHT, "ctl", "--", pid, "on"], program)
    assert completed.returncode == 64, completed.stderr
    assert f"opsight ctl: {pid!r} is not a process id" in completed.stderr
