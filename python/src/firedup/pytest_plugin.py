"""The pytest plugin (entry point ``pytest11``: loaded wherever the firedup wheel is installed).

``firedup_server`` is a fixture factory usable from a fixture of any scope: calling it starts a
server under firedup and returns the ready :class:`firedup.Server`::

    @pytest.fixture(scope="module")
    def web(firedup_server):
        with firedup_server(["python", "-m", "http.server", "{port}"], port="auto") as server:
            yield server          # stopped, and checked gone, when the module's tests are done

A server not used with ``with`` is stopped at the end of the session. Every server is owned by
the pytest process (``firedup run --owner``): a session killed by SIGKILL or SIGTERM takes its
servers with it. A start that does not
become ready fails the test (or errors its setup) with the verdict block (signature, reason,
decisive line and its number, context, log) instead of a timeout. ``--firedup-keep`` leaves every
server running for debugging and lists them at the end (``firedup stop RUN_ID`` ends them).
"""

from __future__ import annotations

from typing import Any, Generator, Iterator, List, Sequence

import pytest

from ._launch import NotReady, Server, ServersLeftBehind, start

KEEP_OPTION = "--firedup-keep"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("firedup")
    group.addoption(
        KEEP_OPTION,
        action="store_true",
        default=False,
        help="leave the servers started by firedup_server running (for debugging); "
        "firedup stop RUN_ID ends them",
    )


class ServerFactory:
    """``firedup_server(command, **options)``: :func:`firedup.launch`'s options."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.started: List[Server] = []

    def __call__(self, command: Sequence[str], *, keep: bool = False, **options: Any) -> Server:
        __tracebackhide__ = True
        if keep or self.keep:
            # A kept server outlives this session: this process does not own it.
            options.setdefault("owner", None)
        server = start(command, **options)
        if keep or self.keep:
            server.keep()
        self.started.append(server)
        return server

    def stop_all(self) -> None:
        """Stops every server not stopped yet, also after a stop that found a survivor or
        failed; then raises :class:`firedup.ServersLeftBehind` naming every one that did (or
        the one error alone)."""
        errors: List[Exception] = []
        for s in self.started:
            if not s.kept and s.teardown is None:
                try:
                    s.stop()
                except Exception as e:  # noqa: BLE001 - every server is stopped, then all reported
                    errors.append(e)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ServersLeftBehind(errors)


@pytest.fixture(scope="session")
def firedup_server(request: pytest.FixtureRequest) -> Iterator[ServerFactory]:
    """Starts servers under firedup: ``firedup_server(command, port="auto", profile=...,
    timeout=..., ready_line=..., ...)`` returns the ready :class:`firedup.Server`."""
    factory = ServerFactory(keep=bool(request.config.getoption(KEEP_OPTION)))
    request.config.stash[_factory_key] = factory
    yield factory
    factory.stop_all()


_factory_key = pytest.StashKey[ServerFactory]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    # A server that did not start is reported by its verdict, not by a traceback through firedup;
    # the block's first line (`firedup: FAILED (port_in_use) ...`) is pytest's summary line.
    if call.excinfo is not None and call.excinfo.errisinstance(NotReady):
        report.longrepr = f"{call.excinfo.value}\n(a server of {item.nodeid} did not become ready)"
    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    factory = config.stash.get(_factory_key, None)
    if factory is None:
        return
    kept = [s for s in factory.started if s.kept]
    if kept:
        terminalreporter.section("firedup: servers left running (--firedup-keep)")
        for s in kept:
            terminalreporter.write_line(f"{s.run_id}  {s.url or '-'}  pid {s.pid}  log {s.log}")
        terminalreporter.write_line("stop them with: firedup stop RUN_ID")
