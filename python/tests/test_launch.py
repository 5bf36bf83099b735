"""firedup.launch (the context manager) and firedup.start against real servers: python -m
http.server and Redis, ready on a port firedup picked; a server that cannot bind raises NotReady
with its signature and decisive line."""

from __future__ import annotations

import os
import urllib.request

import pytest

import firedup
from helpers import held_port, port_is_free, processes_of_run, redis_ping

HTTP_SERVER = ["python3", "-m", "http.server", "--bind", "127.0.0.1", "{port}"]


def test_an_http_server_on_an_auto_port_answers_at_its_url_and_is_gone_after_the_block() -> None:
    with firedup.launch(HTTP_SERVER, port="auto", timeout="60s", grace="5s") as server:
        assert server.verdict["verdict"] == "ready"
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert server.pid in processes_of_run(server.run_id)
        with urllib.request.urlopen(server.url, timeout=10) as r:
            assert r.status == 200
    teardown = server.teardown
    assert teardown is not None and teardown.clean, teardown
    assert server.pid in teardown.stopped
    assert teardown.port == server.port and teardown.port_free is True
    assert processes_of_run(server.run_id) == []
    assert port_is_free(server.port)


def test_redis_by_its_profile_is_ready_and_answers_ping() -> None:
    with firedup.launch(
        ["redis-server", "--port", "{port}", "--save", ""],
        profile="redis",
        port="auto",
        timeout="60s",
        name="pytest-redis",
    ) as redis:
        assert redis.name == "pytest-redis"
        assert redis.port is not None
        assert redis_ping(redis.port) == b"+PONG\r\n"
    assert redis.teardown is not None and redis.teardown.clean


def test_a_server_that_cannot_bind_raises_not_ready_with_its_signature_and_decisive_line() -> None:
    holder = held_port()
    port = holder.getsockname()[1]
    try:
        with pytest.raises(firedup.NotReady) as failed:
            with firedup.launch(
                ["python3", "-m", "http.server", "--bind", "127.0.0.1", str(port)],
                ready_line="Serving HTTP",
                timeout="60s",
            ):
                pytest.fail("a server whose port is taken was ready")
    finally:
        holder.close()
    e = failed.value
    assert e.signature == "port_in_use", str(e)
    assert e.verdict["verdict"] == "failed"
    line = e.verdict["line"]
    assert "Address already in use" in line["text"]
    message = str(e)
    assert "FAILED (port_in_use)" in message
    assert f"line {line['number']}: {line['text']}" in message
    assert e.verdict["log"] in message
    # firedup stopped what was left of it before raising.
    assert processes_of_run(e.verdict["run_id"]) == []


def test_a_usage_mistake_is_firedups_own_error() -> None:
    with pytest.raises(firedup.FiredupError, match="no readiness condition"):
        firedup.start(["sleep", "30"])


def test_start_and_stop_without_the_context_manager() -> None:
    # The port reaches the command as FIREDUP_PORT too.
    server = firedup.start(
        [
            "sh",
            "-c",
            'echo "up on $FIREDUP_PORT"; exec python3 -m http.server --bind 127.0.0.1 "$FIREDUP_PORT"',
        ],
        ready_line="up on",
        port="auto",
        timeout="60s",
        grace="2s",
    )
    log = open(server.log).read()
    assert f"up on {server.port}" in log
    first = server.stop()
    assert first.clean and server.pid in first.stopped
    assert server.stop() is first


def test_the_binary_is_the_one_the_wheel_installed() -> None:
    import os
    import sys

    found = firedup.find_firedup()
    assert os.path.realpath(found).startswith(os.path.realpath(sys.prefix)), found


def test_a_port_still_held_after_the_stop_is_left_behind() -> None:
    # Someone else listens on the port the server's command names; the redis profile's ready line
    # alone decides (--no-probe), and the stop then finds the port held.
    holder = held_port()
    port = holder.getsockname()[1]
    try:
        with pytest.raises(firedup.LeftBehind) as left:
            with firedup.launch(
                ["sh", "-c", "echo 'Ready to accept connections'; exec sleep 300", "sh", "--port", str(port)],
                profile="redis",
                extra_args=["--no-probe"],
                timeout="60s",
                grace="2s",
            ) as server:
                assert server.port == port
    finally:
        holder.close()
    t = left.value.teardown
    assert t.clean and t.port_free is False and not t.left_nothing
    assert f"port {port} still held by pid {os.getpid()}" in str(left.value)


def test_a_server_left_running_after_monitor_error_is_stopped_before_not_ready() -> None:
    # firedup's own probe fails (a host that does not resolve): monitor_error, and firedup leaves
    # the server running; the Python API stops it, since the caller gets no handle on it.
    with pytest.raises(firedup.NotReady) as failed:
        firedup.start(
            ["sleep", "300"], http="http://no-such-host.invalid:1/health", timeout="60s", grace="2s"
        )
    e = failed.value
    assert e.verdict["verdict"] == "monitor_error", str(e)
    assert e.verdict["server_running"] is True
    assert e.teardown is not None and e.teardown.clean and e.teardown.stopped
    assert "stopped: stopped 1 process(es)" in str(e)
    assert processes_of_run(e.verdict["run_id"]) == []


def test_a_server_that_never_gets_ready_is_timed_out_not_a_hang() -> None:
    with pytest.raises(firedup.NotReady) as failed:
        firedup.start(["sh", "-c", "echo loading; exec sleep 300"], ready_line="never printed", timeout="2s", grace="2s")
    e = failed.value
    assert e.verdict["verdict"] == "timed_out", str(e)
    assert "TIMED_OUT" in str(e)
    assert processes_of_run(e.verdict["run_id"]) == []


def test_a_job_until_exit_succeeds() -> None:
    job = firedup.start(["sh", "-c", "echo working; exit 0"], until="exit", timeout="60s")
    assert job.verdict["verdict"] == "succeeded"
    assert job.verdict["exit"] == {"code": 0, "core_dumped": False}
    assert job.stop().stopped == []



def test_what_a_teardown_counts_as_left_behind() -> None:
    # The stop's JSON as `firedup stop --json` prints it (tests/port_auto.rs checks the binary's).
    base = {"clean": True, "stopped": [7], "survivors": [], "port": 8080, "port_free": True,
            "port_holders": [], "gpu_after_mib": None, "gpu_released": None, "description": "stopped"}
    table = [
        ({}, True, []),
        ({"gpu_after_mib": 0, "gpu_released": True}, True, []),
        ({"port_free": None, "port_holders": None}, True, []),
        ({"gpu_after_mib": 20480, "gpu_released": False}, False, ["20480 MiB of GPU memory not released"]),
        ({"port_free": False, "port_holders": [42]}, False, ["port 8080 still held by pid 42"]),
        (
            {"clean": False, "survivors": [{"pid": 9, "command": "srv"}]},
            False,
            ["survivors: 9 (srv)"],
        ),
    ]
    for change, left_nothing, problems in table:
        t = firedup.Teardown.from_json({**base, **change})
        assert t.left_nothing is left_nothing, change
        assert t.problems() == problems, change


def test_env_values_reach_the_server_and_no_command_line(tmp_path) -> None:
    """``env=`` values go to firedup in its environment, not its argv: while firedup watches,
    no process's command line (what every user reads in ``ps``) holds the value."""
    secret = "py-env-5e1f0a-never-in-argv"
    got = tmp_path / "got"
    seen = tmp_path / "cmdlines"
    script = (
        f'printf %s "$MY_SERVICE_PASSWD" > {got}; '
        f'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f"; echo; done > {seen} 2>/dev/null; '
        "echo READY; exec sleep 60"
    )
    with firedup.launch(
        ["sh", "-c", script],
        ready_line="READY",
        timeout="60s",
        grace="2s",
        env={"MY_SERVICE_PASSWD": secret},
    ):
        assert got.read_text() == secret
    cmdlines = seen.read_text()
    assert "run --json" in cmdlines  # firedup itself was watching when the lines were read
    assert secret not in cmdlines
