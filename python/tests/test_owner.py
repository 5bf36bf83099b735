"""A pytest session owns the servers it starts (``firedup run --owner``, issue 23): killed by
SIGKILL or SIGTERM, it takes them with it; interrupted by SIGINT while a server is still
starting, it stops that server and prints no traceback of firedup's; ``stop_all`` stops every
server even after one whose stop found a survivor, then reports them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

import firedup
from firedup.pytest_plugin import ServerFactory
from helpers import processes_of_run

CASES = Path(__file__).parent / "cases"
# Bounds of the waits below (never a timing claim: a loaded CI machine may be slow).
BOUND_S = 120.0


def default_signals() -> None:
    # A suite started in the background of a non-interactive shell inherits SIGINT, SIGQUIT (and
    # under nohup SIGHUP) ignored, and Python then installs no KeyboardInterrupt handler: the
    # inner session must get the signals a user's terminal would deliver.
    for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(s, signal.SIG_DFL)


def inner_pytest(case: str, env: dict) -> "subprocess.Popen[str]":
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", case],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=CASES,
        env=env,
        preexec_fn=default_signals,
    )


def wait_for(what: str, check) -> object:
    deadline = time.monotonic() + BOUND_S
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {BOUND_S} s"
        time.sleep(0.05)


def left_within_bound(run_id: str) -> List[int]:
    deadline = time.monotonic() + BOUND_S
    while processes_of_run(run_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    return processes_of_run(run_id)


def own_state(tmp_path: Path) -> dict:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    return dict(os.environ, FIREDUP_STATE_DIR=str(state))


def show(env: dict, run_id: str) -> str:
    done = subprocess.run(
        [firedup.find_firedup(), "show", run_id], capture_output=True, text=True, env=env, check=False
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_pytest_session_takes_its_ready_server_with_it(tmp_path: Path, sig: int) -> None:
    env = own_state(tmp_path)
    run_id_file = tmp_path / "run_id"
    env["FIREDUP_TEST_RUN_ID_FILE"] = str(run_id_file)
    p = inner_pytest("owned_server.py", env)
    try:
        wait_for("the inner session's server ready", run_id_file.exists)
        run_id = run_id_file.read_text()
        assert processes_of_run(run_id), "the server is not running"
        p.send_signal(sig)
        p.communicate(timeout=BOUND_S)
    finally:
        p.kill()
        p.wait()
    assert left_within_bound(run_id) == [], "the server outlived the pytest session that owned it"
    assert show(env, run_id).startswith(f"{run_id}: owner_gone"), show(env, run_id)


def test_sigint_to_pytest_alone_while_a_server_starts_stops_it_without_a_traceback(
    tmp_path: Path,
) -> None:
    env = own_state(tmp_path)
    runs = Path(env["FIREDUP_STATE_DIR"]) / "runs"

    def started_run() -> str:
        found = [d.name for d in runs.glob("*") if (d / "process.json").exists()] if runs.is_dir() else []
        return found[0] if found else ""

    p = inner_pytest("starting_server.py", env)
    try:
        run_id = str(wait_for("the server started", started_run))
        # Its first line is out: the server is starting, no verdict yet.
        wait_for("the server's first line", lambda: "starting" in (runs / run_id / "output.log").read_text())
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=BOUND_S)
    finally:
        p.kill()
        p.wait()
    assert "I/O operation on closed file" not in out, out
    assert "Exception in thread" not in out, out
    assert left_within_bound(run_id) == [], out
    # firedup run stopped it on its SIGTERM, before pytest ended (not only the supervisor once
    # its owner was gone): the history records the run as interrupted.
    assert show(env, run_id).startswith(f"{run_id}: interrupted"), show(env, run_id) + out


class _Survivor(firedup.Server):
    """A server whose stop finds a process left (what a stuck process of another user gives)."""

    def stop(self, check: bool = True) -> firedup.Teardown:
        self.teardown = firedup.Teardown.from_json(
            {
                "clean": False,
                "stopped": [],
                "survivors": [{"pid": 1, "command": f"stuck-{self.run_id}"}],
                "description": "1 process(es) survived",
            }
        )
        raise firedup.LeftBehind(self.run_id, self.teardown)


def test_stop_all_stops_every_server_after_a_survivor_and_reports_them_all() -> None:
    factory = ServerFactory(keep=False)
    real = [
        firedup.start(["sh", "-c", "echo ready; exec sleep 300"], ready_line="ready", grace="2s")
        for _ in range(2)
    ]
    factory.started = [
        _Survivor({"run_id": "survivor-a"}),
        real[0],
        _Survivor({"run_id": "survivor-b"}),
        real[1],
    ]
    try:
        with pytest.raises(firedup.ServersLeftBehind) as e:
            factory.stop_all()
        assert "stuck-survivor-a" in str(e.value) and "stuck-survivor-b" in str(e.value), e.value
        assert len(e.value.errors) == 2
        for s in real:
            assert s.teardown is not None and s.teardown.clean, s.teardown
            assert processes_of_run(s.run_id) == []
    finally:
        for s in real:
            s.stop(check=False)
