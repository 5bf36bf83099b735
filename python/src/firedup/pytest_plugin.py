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

from typing import Any, Generator, Iterator, List, Literal, Mapping, Optional, Sequence, Union

import pytest

from ._errors import JobFailed, NotReady
from ._launch import Server, start
from ._run_args import Duration, Owner, PathArg, ReadyRequest, Until
from ._teardown import ServersLeftBehind

__all__ = ["ServerFactory", "firedup_server"]

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
    """``firedup_server(command, ...)``: :func:`firedup.launch`'s keyword arguments, typed the
    same; the type to annotate the fixture with (``firedup_server: ServerFactory``)."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.started: List[Server] = []

    def __call__(
        self,
        command: Sequence[str],
        *,
        until: Until = "ready",
        profile: Optional[str] = None,
        profile_file: Union[None, PathArg, Sequence[PathArg]] = None,
        http: Optional[str] = None,
        port: Union[None, int, Literal["auto"]] = None,
        ready_request: ReadyRequest = False,
        phase_timeout: Optional[Mapping[str, Duration]] = None,
        ready_line: Union[None, str, Sequence[str]] = None,
        fail_line: Union[None, str, Sequence[str]] = None,
        timeout: Optional[Duration] = None,
        stall: Optional[Duration] = None,
        log_grace: Optional[Duration] = None,
        hold: Optional[Duration] = None,
        no_probe: bool = False,
        queue_timeout: Optional[Duration] = None,
        events: Optional[PathArg] = None,
        log: Optional[PathArg] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[PathArg] = None,
        notify: bool = False,
        grace: Duration = "10s",
        slurm: bool = False,
        sbatch_arg: Union[None, str, Sequence[str]] = None,
        name: Optional[str] = None,
        owner: Owner = True,
        host: Optional[str] = None,
        connect_timeout: Optional[Duration] = None,
        reconnect_for: Optional[Duration] = None,
        extra_args: Sequence[str] = (),
        keep: bool = False,
    ) -> Server:
        __tracebackhide__ = True
        kept = keep or self.keep
        server = start(
            command,
            until=until,
            profile=profile,
            profile_file=profile_file,
            http=http,
            port=port,
            ready_request=ready_request,
            phase_timeout=phase_timeout,
            ready_line=ready_line,
            fail_line=fail_line,
            timeout=timeout,
            stall=stall,
            log_grace=log_grace,
            hold=hold,
            no_probe=no_probe,
            queue_timeout=queue_timeout,
            events=events,
            log=log,
            env=env,
            cwd=cwd,
            notify=notify,
            grace=grace,
            slurm=slurm,
            sbatch_arg=sbatch_arg,
            name=name,
            # A kept server outlives this session: this process does not own it.
            owner=None if kept and owner is True else owner,
            host=host,
            connect_timeout=connect_timeout,
            reconnect_for=reconnect_for,
            extra_args=extra_args,
        )
        if kept:
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
        if call.excinfo.errisinstance(JobFailed):
            what = f"a job of {item.nodeid} failed"
        else:
            what = f"a server of {item.nodeid} did not become ready"
        report.longrepr = f"{call.excinfo.value}\n({what})"
    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    factory = config.stash.get(_factory_key, None)
    if factory is None:
        return
    kept = [s for s in factory.started if s.kept]
    if kept:
        terminalreporter.section("firedup: servers left running (--firedup-keep)")
        for s in kept:
            terminalreporter.write_line(f"{s.run_id}  {s.verdict.get('url') or '-'}  pid {s.pid}  log {s.log}")
        terminalreporter.write_line("stop them with: firedup stop RUN_ID")
