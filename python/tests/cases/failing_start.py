"""Run by test_pytest_output.py in a pytest of its own: a fixture whose server cannot start
(its port is taken), so the test must fail with the verdict block."""

import socket

import pytest


@pytest.fixture
def taken_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    yield s.getsockname()[1]
    s.close()


@pytest.fixture
def web(firedup_server, taken_port):
    return firedup_server(
        ["python3", "-m", "http.server", "--bind", "127.0.0.1", str(taken_port)],
        ready_line="Serving HTTP",
        timeout="60s",
    )


def test_uses_the_server(web):
    raise AssertionError("never reached: the server did not start")
