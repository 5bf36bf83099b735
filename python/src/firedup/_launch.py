"""Start a server (or a job) through ``firedup run --json`` and stop it through ``firedup stop
--json``.

:func:`start` returns a :class:`Server` once the verdict is ``ready`` (or ``succeeded`` with
``until="exit"``); any other verdict raises :class:`NotReady` (:class:`JobFailed` for a job),
whose message is the verdict block, after firedup stopped what was left of the run.
:func:`launch` is the same as a context manager that stops the server on exit and raises
:class:`LeftBehind` when the stop finds something of it still running. firedup's own failure (a
usage mistake, no binary) is :class:`FiredupError`. The keyword arguments are ``firedup run``'s
flags (:mod:`firedup._run_args`), typed.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Dict, Iterator, Literal, Mapping, Optional, Sequence, Union

from ._errors import FiredupError, JobFailed, NoAddress, NotReady
from ._process import json_or_error, run_firedup
from ._run_args import Duration, Owner, PathArg, ReadyRequest, Until, duration_flag, run_args, seconds
from ._teardown import LeftBehind, ServersLeftBehind, Teardown

__all__ = [
    "FiredupError",
    "JobFailed",
    "LeftBehind",
    "NoAddress",
    "NotReady",
    "Server",
    "ServersLeftBehind",
    "Teardown",
    "launch",
    "run_args",
    "start",
]


class Server:
    """A started server (or a finished job): ``url``, ``port``, ``pid``, ``log``, ``run_id``,
    ``name`` and the whole JSON ``verdict``. :meth:`stop` stops it and says what the stop found;
    used as a context manager, the exit stops it and raises :class:`LeftBehind` if anything of
    it is left.

    ``port`` and ``url`` are ``int`` and ``str``, not Optional: a server started ready with
    ``port`` (``"auto"`` or a number) or ``http`` always has them, so typed code uses them as
    they are. Asked of a run whose verdict has none (readiness by a log line alone), they raise
    :class:`NoAddress`; ``verdict.get("port")`` is the Optional form."""

    def __init__(self, verdict: Mapping[str, Any], grace: Duration = "10s") -> None:
        self.verdict: Dict[str, Any] = dict(verdict)
        self.pid: Optional[int] = verdict.get("pid")
        self.log: str = verdict.get("log", "")
        self.run_id: str = verdict.get("run_id", "")
        self.name: Optional[str] = verdict.get("name")
        self.teardown: Optional[Teardown] = None
        self.kept = False
        self._grace = grace

    @property
    def port(self) -> int:
        """The TCP port the server is ready on (raises :class:`NoAddress` when none is known)."""
        p = self.verdict.get("port")
        if p is None:
            raise NoAddress(
                f"run {self.run_id} has no port in its verdict: start it with port='auto' "
                "(or a number) or http=URL, or read verdict.get('port')"
            )
        return int(p)

    @property
    def url(self) -> str:
        """The server's base URL, e.g. ``http://127.0.0.1:8000`` (raises :class:`NoAddress`
        when none is known)."""
        u = self.verdict.get("url")
        if u is None:
            raise NoAddress(
                f"run {self.run_id} has no URL in its verdict: start it with port='auto' "
                "(or a number) or http=URL, or read verdict.get('url')"
            )
        return str(u)

    def __repr__(self) -> str:
        return f"<firedup.Server {self.run_id} url={self.verdict.get('url')} pid={self.pid}>"

    def stop(self, check: bool = True) -> Teardown:
        """Stops the run (SIGTERM, the grace, SIGKILL; also what left its process tree) and
        returns what the stop found; with ``check``, raises :class:`LeftBehind` when something
        is left (:attr:`Teardown.left_nothing`). A second call returns the first stop's findings."""
        if self.teardown is None:
            done = run_firedup(
                ["stop", "--json", "--grace", duration_flag(self._grace), self.run_id],
                stop_within=seconds(self._grace),
            )
            self.teardown = Teardown.from_json(json_or_error(done, f"firedup stop {self.run_id}"))
        if check and not self.teardown.left_nothing:
            raise LeftBehind(self.run_id, self.teardown)
        return self.teardown

    def keep(self) -> None:
        """Leaves the server running: the context manager's exit does not stop it
        (``firedup stop RUN_ID`` does). A server started with an owner (the default: this
        process) still ends with its owner: start it with ``owner=None`` to outlive it."""
        self.kept = True

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.kept:
            return
        # A failing body keeps its own exception; a dirty stop is then only reported.
        teardown = self.stop(check=exc is None)
        if exc is not None and not teardown.left_nothing:
            sys.stderr.write(f"firedup stop {self.run_id}: {'; '.join(teardown.problems())}\n")


def start(
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
) -> Server:
    """Launches ``command`` with ``firedup run --json`` and waits for its verdict. The options
    are :func:`launch`'s. Returns the ready :class:`Server` (not stopped on its own: call
    :meth:`Server.stop`, or use :func:`launch`); raises :class:`NotReady` for any other verdict,
    :class:`JobFailed` when a job (``until="exit"``) did not succeed."""
    __tracebackhide__ = True
    args = run_args(
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
        owner=owner,
        host=host,
        connect_timeout=connect_timeout,
        reconnect_for=reconnect_for,
        extra_args=extra_args,
    )
    done = run_firedup(args, stop_within=seconds(grace), env=env)
    verdict = json_or_error(done, "firedup run")
    wanted = "succeeded" if until == "exit" else "ready"
    server = Server(verdict, grace=grace)
    if verdict.get("verdict") != wanted:
        # The caller gets no handle on a server that is not ready: none may be left running.
        left = server.stop(check=False) if verdict.get("server_running") else None
        raise (JobFailed if until == "exit" else NotReady)(verdict, left)
    return server


@contextlib.contextmanager
def launch(
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
) -> Iterator[Server]:
    """Starts ``command`` under firedup, yields the ready :class:`Server`, and on exit stops it
    and verifies that nothing of it is left (:class:`LeftBehind` otherwise; ``keep=True`` leaves
    it running, so it has no owner unless ``owner`` names one).

    ``owner`` (default: this process) is the process whose end stops the run, however it ends
    (SIGKILL included): a test session killed by its CI's timeout takes its servers with it.

    ``port="auto"``: firedup picks a free port, puts it in place of every ``{port}`` in
    ``command`` and in ``FIREDUP_PORT``, and waits until the server's own processes listen there.
    ``until="exit"`` watches a job to its end: ``succeeded``, or :class:`JobFailed`.

    Every other keyword is the ``firedup run`` flag of the same name (``_`` for ``-``; see
    ``firedup run --help``): ``ready_request`` (``True`` or ``"openai"`` / ``"tgi"``),
    ``phase_timeout`` (``{"capture_cuda_graph": "15m"}``), ``no_probe``, ``hold``, ``host``,
    ``slurm`` and ``sbatch_arg`` ... A duration is a str (``"90s"``, ``"20m"``), seconds, or a
    :class:`datetime.timedelta`; a repeatable flag takes a str or a list. ``env`` values reach
    the command through firedup's environment, never its command line. ``extra_args`` are more
    flags, as written on firedup's command line. A verdict other than ready raises
    :class:`NotReady`, whose message is the verdict block.
    """
    __tracebackhide__ = True
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
        owner=None if keep and owner is True else owner,
        host=host,
        connect_timeout=connect_timeout,
        reconnect_for=reconnect_for,
        extra_args=extra_args,
    )
    if keep:
        server.keep()
    with server:
        yield server
