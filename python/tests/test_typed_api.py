"""The typed API (issue 25): one typed keyword of launch/start/firedup_server per `firedup run`
flag that makes sense from Python, checked against the binary's own --help; those keywords
reaching firedup; durations as str, seconds or timedelta; a failed job raising JobFailed;
Server.port/.url typed int/str (NoAddress when unknown); $FIREDUP_BIN over the wheel's binary;
py.typed shipped, and mypy --strict accepting python/examples/typed_usage.py while catching the
mistakes a user should be told about."""

from __future__ import annotations

import inspect
import os
import re
import stat
import subprocess
import sys
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, List

import pytest

import firedup
from firedup._run_args import NOT_FROM_PYTHON, RUN_FLAGS, run_args, seconds
from firedup.pytest_plugin import ServerFactory

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "typed_usage.py"


def keywords(f: Any, leave_out: tuple = ()) -> Dict[str, inspect.Parameter]:
    return {
        n: p
        for n, p in inspect.signature(f).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and n not in leave_out
    }


def test_every_run_flag_is_a_typed_keyword_or_says_why_not() -> None:
    help_text = subprocess.run(
        [firedup.find_firedup(), "run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    flags = set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]*)", help_text, re.M))
    assert "--ready-request" in flags and "--host" in flags, help_text
    assert flags - set(RUN_FLAGS) - set(NOT_FROM_PYTHON) == set(), "flags with no keyword"
    assert set(RUN_FLAGS) - flags == set(), "keywords for flags run does not have"
    # start, launch, the fixture and run_args take the same keywords, typed and defaulted alike.
    want = keywords(run_args)
    assert set(RUN_FLAGS.values()) <= set(want)
    for f in (firedup.start, firedup.launch, ServerFactory.__call__):
        got = keywords(f, leave_out=("keep",))
        assert list(got) == list(want), f
        for n, p in want.items():
            assert (got[n].annotation, got[n].default) == (p.annotation, p.default), (f, n)
    assert keywords(firedup.start)["until"].annotation == "Until"


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"ready_request": True}, ["--ready-request"]),
        ({"ready_request": "tgi"}, ["--ready-request=tgi"]),
        ({"phase_timeout": {"capture_cuda_graph": "15m", "load": 90}},
         ["--phase-timeout", "capture_cuda_graph=15m", "--phase-timeout", "load=90s"]),
        ({"hold": timedelta(minutes=2)}, ["--hold", "120s"]),
        ({"timeout": 0.25}, ["--timeout", "0.25s"]),
        ({"stall": 1e-05}, ["--stall", "0.00001s"]),
        ({"no_probe": True, "notify": True}, ["--no-probe", "--notify"]),
        ({"log_grace": "3s", "queue_timeout": "1h"}, ["--log-grace", "3s", "--queue-timeout", "1h"]),
        ({"connect_timeout": 5, "reconnect_for": "5m"}, ["--connect-timeout", "5s", "--reconnect-for", "5m"]),
        ({"profile_file": Path("/p/a.toml")}, ["--profile-file", "/p/a.toml"]),
        ({"profile_file": ["a.toml", Path("b.toml")]}, ["--profile-file", "a.toml", "--profile-file", "b.toml"]),
        ({"events": Path("/tmp/e.ndjson"), "cwd": Path("/srv")}, ["--cwd", "/srv", "--events", "/tmp/e.ndjson"]),
        ({"slurm": True, "sbatch_arg": ["--mem=16G", "-N2"]},
         ["--slurm", "--sbatch-arg=--mem=16G", "--sbatch-arg=-N2"]),
    ],
)
def test_the_keywords_are_the_flags(options: Dict[str, Any], expected: List[str]) -> None:
    a = run_args(["srv"], owner=None, **options)
    head = a[: a.index("--")]
    assert head[:6] == ["run", "--json", "--until", "ready", "--grace", "10s"], a
    assert head[6:] == expected
    assert a[a.index("--") :] == ["--", "srv"]


def test_a_run_elsewhere_has_no_owner_pid_of_this_machine() -> None:
    assert "--owner" in run_args(["srv"])
    for options in ({"host": "gpu-box"}, {"slurm": True}, {"extra_args": ["--host=gpu-box"]}):
        a = run_args(["srv"], **options)
        assert "--owner" not in a, options
    assert run_args(["srv"], host="gpu-box", grace=timedelta(seconds=3))[:8] == [
        "run", "--json", "--until", "ready", "--grace", "3s", "--host", "gpu-box"
    ]


def test_this_sides_bounds_read_every_form_of_duration() -> None:
    # How long the API waits for firedup to stop a run (its grace plus a margin).
    table = [("90s", 90.0), ("1h30m", 5400.0), ("250ms", 0.25), ("2.5s", 2.5), ("20m", 1200.0),
             ("off", 10.0), ("", 10.0), (timedelta(minutes=1), 60.0), (2, 2.0), (0.5, 0.5)]
    for d, want in table:
        assert seconds(d) == want, d


def test_wrong_values_are_refused_before_firedup_runs() -> None:
    with pytest.raises(ValueError, match="'ready' .* or 'exit'"):
        run_args(["srv"], until="exitt")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite and not negative"):
        run_args(["srv"], timeout=-1)
    with pytest.raises(TypeError, match="not a bool"):
        run_args(["srv"], stall=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options, said",
    [
        ({"until": "exit", "hold": timedelta(seconds=1)}, "--hold applies to server mode"),
        ({"ready_line": "up", "phase_timeout": {"no_such_phase": "1m"}}, "has no phase 'no_such_phase'"),
        ({"ready_line": "up", "ready_request": True}, "does not know a request shape"),
    ],
)
def test_the_keywords_reach_firedup(options: Dict[str, Any], said: str) -> None:
    # firedup's own answer to each flag (a usage error, before anything starts) shows it got it.
    with pytest.raises(firedup.FiredupError, match=re.escape(said)):
        firedup.start(["sh", "-c", "echo up; exec sleep 300"], grace="2s", **options)


def test_a_failed_job_raises_job_failed_a_not_ready() -> None:
    with pytest.raises(firedup.JobFailed) as failed:
        firedup.start(["sh", "-c", "echo working; exit 3"], until="exit", timeout=timedelta(minutes=1))
    e = failed.value
    assert isinstance(e, firedup.NotReady)
    assert e.verdict["verdict"] == "exited" and e.verdict["exit"]["code"] == 3, str(e)
    assert "exit:    exit code 3" in str(e)
    # A server that does not become ready is still NotReady, not JobFailed.
    with pytest.raises(firedup.NotReady) as not_ready:
        firedup.start(["sh", "-c", "exit 3"], ready_line="never", timeout="60s")
    assert not isinstance(not_ready.value, firedup.JobFailed)


def test_port_and_url_are_int_and_str_and_say_so_when_unknown() -> None:
    with firedup.launch(["sh", "-c", "echo up; exec sleep 300"], ready_line="up", grace=2) as s:
        with pytest.raises(firedup.NoAddress, match="no port in its verdict: start it with port='auto'"):
            s.port
        assert getattr(s, "url", None) is None
        assert "url=None" in repr(s)
    with firedup.launch(
        ["python3", "-m", "http.server", "--bind", "127.0.0.1", "{port}"], port="auto", timeout="60s"
    ) as web:
        assert isinstance(web.port, int) and web.url == f"http://127.0.0.1:{web.port}"


def test_firedup_bin_wins_over_the_wheels_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel_binary = firedup.find_firedup()
    assert os.path.realpath(wheel_binary).startswith(os.path.realpath(sys.prefix)), wheel_binary
    called = tmp_path / "called"
    wrapper = tmp_path / "my-firedup"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{called}"\nexec "{wheel_binary}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FIREDUP_BIN", str(wrapper))
    assert firedup.find_firedup() == str(wrapper)
    job = firedup.start(["true"], until="exit", timeout="60s")
    assert job.verdict["verdict"] == "succeeded"
    assert called.read_text().startswith("run --json --until exit"), called.read_text()


def test_py_typed_is_in_the_installed_package() -> None:
    files = [str(f) for f in metadata.distribution("firedup").files or []]
    assert "firedup/py.typed" in files, files
    assert (Path(firedup.__file__).parent / "py.typed").is_file()


BAD = '''
from datetime import timedelta
import firedup

firedup.start(["job"], until="exitt")
firedup.launch(["srv"], ready_requst=True)
firedup.start(["srv"], hold=[1])
port: None = firedup.start(["srv"], port="auto").port
firedup.start(["srv"], port="any")
'''


def test_mypy_strict_accepts_the_example_and_catches_the_mistakes(tmp_path: Path) -> None:
    # mypy is pinned and installed beside pytest by .ci/run; the installed wheel is what it reads.
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.fail("mypy is not installed in this venv: pip install mypy (.ci/run pins its version)")
    bad = tmp_path / "bad_usage.py"
    bad.write_text(BAD)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-color-output", "--cache-dir", str(tmp_path / "cache"),
         str(EXAMPLE), str(bad)],
        capture_output=True, text=True, cwd=tmp_path, check=False,
    )
    out = done.stdout + done.stderr
    assert "typed_usage.py" not in out, out
    lines = sorted({int(m) for m in re.findall(r"bad_usage\.py:(\d+): error", out)})
    assert lines == [5, 6, 7, 8, 9], out


def test_the_typed_example_runs_as_a_pytest_module(tmp_path: Path) -> None:
    # What mypy checks is also code that works: the example's tests pass against real servers.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(EXAMPLE)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout, done.stdout
