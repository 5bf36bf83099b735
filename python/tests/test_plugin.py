"""The pytest plugin's firedup_server fixture factory, from fixtures of several scopes."""

from __future__ import annotations

import urllib.request
from typing import Iterator

import pytest

import firedup
from helpers import processes_of_run, redis_ping


@pytest.fixture(scope="session")
def shell_server(firedup_server) -> Iterator[firedup.Server]:
    with firedup_server(
        ["sh", "-c", "echo session up; exec sleep 300"], ready_line="session up", grace="2s"
    ) as server:
        yield server


@pytest.fixture(scope="module")
def web(firedup_server) -> Iterator[firedup.Server]:
    with firedup_server(
        ["python3", "-m", "http.server", "--bind", "127.0.0.1", "{port}"],
        port="auto",
        timeout="60s",
    ) as server:
        yield server
    assert server.teardown is not None and server.teardown.clean


@pytest.fixture(scope="class")
def redis(firedup_server) -> firedup.Server:
    # Without `with`: stopped at the end of the session.
    return firedup_server(
        ["redis-server", "--port", "{port}", "--save", ""], profile="redis", port="auto"
    )


def test_the_module_server_answers(web: firedup.Server) -> None:
    with urllib.request.urlopen(web.url, timeout=10) as r:
        assert r.status == 200


def test_the_module_server_is_the_same_one(web: firedup.Server) -> None:
    assert web.pid in processes_of_run(web.run_id)


class TestRedis:
    def test_ping(self, redis: firedup.Server) -> None:
        assert redis.port is not None
        assert redis_ping(redis.port) == b"+PONG\r\n"

    def test_its_verdict_is_ready(self, redis: firedup.Server) -> None:
        assert redis.verdict["verdict"] == "ready"
        assert redis.verdict["port"] == redis.port


def test_a_function_scoped_server(firedup_server) -> None:
    with firedup_server(
        ["sh", "-c", "echo ready; exec sleep 300"], ready_line="ready", grace="2s"
    ) as s:
        assert s.pid in processes_of_run(s.run_id)
    assert processes_of_run(s.run_id) == []


def test_a_session_scoped_server(shell_server: firedup.Server) -> None:
    assert shell_server.pid in processes_of_run(shell_server.run_id)
    assert shell_server.verdict["line"]["text"] == "session up"
