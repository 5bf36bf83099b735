"""A user's typed test module over the firedup package: what ``mypy --strict`` must accept with
the installed wheel (``.ci/run`` checks it; python/tests/test_typed_api.py also checks that the
mistakes a type checker should catch are caught). It uses launch, start, Server, the exceptions
and the pytest fixture the way a test suite does; as a pytest module it also runs."""

from __future__ import annotations

import urllib.request
from datetime import timedelta
from typing import Iterator, Optional

import pytest

import firedup
from firedup.pytest_plugin import ServerFactory

HTTP_SERVER = ["python3", "-m", "http.server", "--bind", "127.0.0.1", "{port}"]


def status_of(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as r:
        status: int = r.status
        return status


def test_an_http_server_on_an_auto_port() -> None:
    # Durations as firedup writes them, as seconds, or as a timedelta.
    with firedup.launch(HTTP_SERVER, port="auto", timeout="60s", grace=timedelta(seconds=5), hold=0.5) as server:
        # A ready port="auto" server has a port and a URL: int and str, no Optional to narrow.
        port: int = server.port
        assert server.url == f"http://127.0.0.1:{port}"
        assert status_of(server.url) == 200
    teardown: Optional[firedup.Teardown] = server.teardown
    assert teardown is not None and teardown.left_nothing


def test_a_job_that_fails_raises_job_failed() -> None:
    mode: firedup.Until = "exit"
    with pytest.raises(firedup.JobFailed) as failed:
        firedup.start(["sh", "-c", "echo working; exit 3"], until=mode, timeout=60.0)
    assert failed.value.verdict["exit"]["code"] == 3
    assert isinstance(failed.value, firedup.NotReady)


def test_a_server_judged_by_its_log_alone() -> None:
    server = firedup.start(
        ["sh", "-c", "echo up; exec sleep 300"],
        ready_line=["up"],
        fail_line="Traceback",
        stall="off",
        no_probe=True,
        grace=2,
        env={"MODE": "test"},
        name=None,
        owner=True,
    )
    try:
        # No port was asked for: reading one raises NoAddress (an AttributeError).
        assert getattr(server, "port", None) is None
        assert server.verdict.get("port") is None
    finally:
        found: firedup.Teardown = server.stop()
    assert found.clean


def vllm(model: str, host: Optional[str] = None) -> firedup.Server:
    """Never called here (no GPU): the keywords an LLM server's start takes, type-checked."""
    return firedup.start(
        ["vllm", "serve", model, "--port", "{port}"],
        profile="vllm",
        port="auto",
        ready_request=True,
        phase_timeout={"capture_cuda_graph": "15m", "load_weights": timedelta(minutes=10)},
        timeout=timedelta(minutes=30),
        stall="5m",
        hold="30s",
        host=host,
        connect_timeout=10,
        reconnect_for="5m",
        events="events.ndjson",
    )


@pytest.fixture(scope="module")
def web(firedup_server: ServerFactory) -> Iterator[firedup.Server]:
    with firedup_server(HTTP_SERVER, port="auto", timeout="60s") as server:
        yield server


def test_the_fixture_server_answers(web: firedup.Server) -> None:
    assert status_of(web.url) == 200
    assert web.port > 0
