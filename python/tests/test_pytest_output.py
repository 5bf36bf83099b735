"""pytest itself, run on cases/: a failed start shows its verdict (signature, decisive line and
its number) in pytest's output, a failed job says it was a job, and --firedup-keep leaves the
server running."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import firedup
from helpers import processes_of_run

CASES = Path(__file__).parent / "cases"


def inner_pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", *args],
        capture_output=True,
        text=True,
        cwd=CASES,
        timeout=300,
        check=False,
    )


def test_a_failed_start_fails_the_test_with_the_signature_and_the_decisive_line() -> None:
    done = inner_pytest("failing_start.py")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "never reached" not in out, out
    assert "FAILED (port_in_use)" in out, out
    found = re.search(r"line (\d+): (.*Address already in use.*)", out)
    assert found, out
    assert "did not become ready" in out, out
    # pytest's own summary line names the verdict.
    assert re.search(r"^ERROR .* - firedup: FAILED \(port_in_use\)", out, re.M), out
    # The run it names ended: nothing of it is left.
    run = re.search(r"run: +(\S+)", out)
    assert run, out
    assert processes_of_run(run.group(1)) == []


def test_a_failed_job_fails_the_test_saying_a_job_failed() -> None:
    done = inner_pytest("failing_job.py")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "never reached" not in out, out
    assert "firedup: EXITED" in out and "exit:    exit code 3" in out, out
    assert re.search(r"\(a job of \S*failing_job.py::test_runs_a_job failed\)", out), out
    assert "did not become ready" not in out, out


def test_firedup_keep_leaves_the_server_running_for_a_later_stop() -> None:
    done = inner_pytest("kept_server.py", "--firedup-keep")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "servers left running (--firedup-keep)" in done.stdout, done.stdout
    run_id = re.search(r"RUN_ID=(\S+)", done.stdout).group(1)
    assert processes_of_run(run_id), "the kept server is gone"
    stop = subprocess.run(
        [firedup.find_firedup(), "stop", "--json", "--grace", "2s", run_id],
        capture_output=True,
        text=True,
        check=False,
    )
    assert stop.returncode == 0, stop.stderr
    assert json.loads(stop.stdout)["clean"] is True
    assert processes_of_run(run_id) == []
