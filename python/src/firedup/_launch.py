"""Start a server through ``firedup run --json`` and stop it through ``firedup stop --json``.

:func:`start` returns a :class:`Server` once the verdict is ``ready`` (or ``succeeded`` with
``until="exit"``); any other verdict raises :class:`NotReady`, whose message is the verdict block,
after firedup stopped what was left of the run. :func:`launch` is the same as a context manager
that stops the server on exit and raises :class:`LeftBehind` when the stop finds something of it
still running. firedup's own failure (a usage mistake, no binary) is :class:`FiredupError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, Union


from ._binary import find_firedup
from ._verdict import verdict_block

__all__ = [
    "FiredupError",
    "LeftBehind",
    "NotReady",
    "Server",
    "ServersLeftBehind",
    "Teardown",
    "launch",
    "start",
]

Duration = Union[str, int, float]
"""A duration as firedup's flags take it (``"250ms"``, ``"90s"``, ``"20m"``, ``"off"``), or seconds."""


class FiredupError(RuntimeError):
    """firedup itself failed or was called wrongly: its message is firedup's sentence."""


class NotReady(Exception):
    """The server did not become ready: ``verdict`` is the JSON verdict, the message its block.
    ``teardown`` is the stop made here when firedup had left the server running (after
    ``monitor_error``, firedup's own probe failing, it does not stop a server it cannot judge)."""

    def __init__(self, verdict: Mapping[str, Any], teardown: Optional["Teardown"] = None) -> None:
        block = verdict_block(verdict)
        if teardown is not None:
            block += f"\n  stopped: {teardown.description}"
        super().__init__(block)
        self.verdict: Dict[str, Any] = dict(verdict)
        self.teardown = teardown

    @property
    def signature(self) -> Optional[str]:
        """The failure signature (``port_in_use``, ``cuda_oom`` ...), or None."""
        return self.verdict.get("signature")


@dataclass(frozen=True)
class Teardown:
    """What ``firedup stop --json`` found (docs/contract.md, "stop --json")."""

    clean: bool
    stopped: List[int]
    survivors: List[Dict[str, Any]]
    port: Optional[int]
    port_free: Optional[bool]
    gpu_after_mib: Optional[int]
    gpu_released: Optional[bool]
    description: str
    raw: Dict[str, Any] = field(repr=False)

    @property
    def left_nothing(self) -> bool:
        """No process of the run survived, and, where known, its port is free and its GPU memory
        released (a port or GPU memory still held is what the next server trips on)."""
        return self.clean and self.port_free is not False and self.gpu_released is not False

    def problems(self) -> List[str]:
        """What is left, one phrase each."""
        p = []
        if self.survivors:
            p.append("survivors: " + ", ".join(f"{s.get('pid')} ({s.get('command')})" for s in self.survivors))
        elif not self.clean:
            p.append(self.description)
        if self.port_free is False:
            held = ", ".join(str(h) for h in self.raw.get("port_holders") or [])
            p.append(f"port {self.port} still held" + (f" by pid {held}" if held else ""))
        if self.gpu_released is False:
            p.append(f"{self.gpu_after_mib} MiB of GPU memory not released")
        return p

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Teardown":
        return cls(
            clean=bool(d.get("clean")),
            stopped=list(d.get("stopped") or []),
            survivors=list(d.get("survivors") or []),
            port=d.get("port"),
            port_free=d.get("port_free"),
            gpu_after_mib=d.get("gpu_after_mib"),
            gpu_released=d.get("gpu_released"),
            description=str(d.get("description", "")),
            raw=dict(d),
        )


class LeftBehind(RuntimeError):
    """The stop found something of the run left: a process, its port still held, or GPU memory
    not released (:attr:`Teardown.left_nothing` is false)."""

    def __init__(self, run_id: str, teardown: Teardown) -> None:
        super().__init__(f"firedup stop {run_id}: " + "; ".join(teardown.problems()))
        self.teardown = teardown


class ServersLeftBehind(RuntimeError):
    """Several stops found something left (or failed): ``errors`` holds each one, the message
    names them all."""

    def __init__(self, errors: Sequence[Exception]) -> None:
        super().__init__(
            f"{len(errors)} server(s) not stopped cleanly:\n" + "\n".join(f"  {e}" for e in errors)
        )
        self.errors: List[Exception] = list(errors)


Owner = Union[int, bool, None]
"""The process whose end stops the run (``firedup run --owner PID``): ``True`` (the default) is
this Python process, an int another pid, ``None`` or ``False`` none (the server may outlive this
process: ``firedup stop RUN_ID`` ends it)."""

# How long firedup run may take to stop a starting server and exit once sent SIGTERM, beyond its
# grace (the stop's SIGKILL and its check that nothing is left).
_STOP_SLACK_S = 30.0


def _duration(d: Duration) -> str:
    return d if isinstance(d, str) else f"{d}s"


def _seconds(d: Duration) -> float:
    """A duration in seconds, for a bound of this side's own (10 when it cannot be read)."""
    if not isinstance(d, str):
        return float(d)
    units = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0))
    for unit, scale in units:
        if d.endswith(unit) and d[: -len(unit)].replace(".", "", 1).isdigit():
            return float(d[: -len(unit)]) * scale
    return 10.0


def _many(x: Union[None, str, Sequence[str]]) -> List[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def run_args(
    command: Sequence[str],
    *,
    profile: Optional[str] = None,
    port: Union[None, int, Literal["auto"]] = None,
    timeout: Optional[Duration] = None,
    ready_line: Union[None, str, Sequence[str]] = None,
    fail_line: Union[None, str, Sequence[str]] = None,
    http: Optional[str] = None,
    stall: Optional[Duration] = None,
    until: str = "ready",
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    log: Optional[str] = None,
    name: Optional[str] = None,
    grace: Duration = "10s",
    owner: Owner = True,
    extra_args: Sequence[str] = (),
) -> List[str]:
    """The arguments of ``firedup run --json`` for these options (the binary not included).
    ``env`` gives only its names (``--env KEY``): firedup must get the values in its environment
    (``_firedup(..., env=env)``)."""
    if isinstance(command, str):
        raise TypeError("command is a list of arguments, e.g. ['python', '-m', 'http.server', '{port}']")
    a = ["run", "--json", "--until", until, "--grace", _duration(grace)]
    owner_pid = _owner_pid(owner, extra_args)
    if owner_pid is not None:
        a += ["--owner", str(owner_pid)]
    if profile is not None:
        a += ["--profile", profile]
    if port is not None:
        a += ["--port", str(port)]
    if timeout is not None:
        a += ["--timeout", _duration(timeout)]
    if stall is not None:
        a += ["--stall", _duration(stall)]
    for r in _many(ready_line):
        a += ["--ready-line", r]
    for r in _many(fail_line):
        a += ["--fail-line", r]
    if http is not None:
        a += ["--http", http]
    # Only the names: the values travel in firedup's own environment (``_firedup``'s ``env``),
    # never in its argv, which every user of the machine reads in ``ps``.
    for k in env or {}:
        a += ["--env", str(k)]
    if cwd is not None:
        a += ["--cwd", str(cwd)]
    if log is not None:
        a += ["--log", str(log)]
    if name is not None:
        a += ["--name", name]
    a += list(extra_args)
    return a + ["--", *[str(c) for c in command]]


def _owner_pid(owner: Owner, extra_args: Sequence[str]) -> Optional[int]:
    """The pid for ``--owner``: this process by default, unless ``extra_args`` sends the run to
    another machine (``--host``, ``--slurm``), where a pid of this one means nothing."""
    if owner is None or owner is False:
        return None
    if owner is True:
        elsewhere = any(a in ("--host", "--slurm") or a.startswith("--host=") for a in extra_args)
        return None if elsewhere else os.getpid()
    return int(owner)


def _firedup(
    args: Sequence[str],
    stop_within: float = 10.0,
    env: Optional[Mapping[str, str]] = None,
) -> "subprocess.CompletedProcess[str]":
    """Runs firedup to its end. Its progress (stderr) is passed on line by line as it comes, to
    ``sys.stderr`` (where pytest captures it, to show with a failure), and kept for the error.

    Interrupted here (a KeyboardInterrupt from SIGINT to this process alone, or any exception),
    firedup is sent SIGTERM, which stops a starting run and ends it, and is waited for (bounded
    by ``stop_within`` seconds, its grace, plus a margin) before the exception goes on."""
    child_env = None
    if env:
        # The values of ``--env KEY``: firedup reads them from its environment.
        child_env = dict(os.environ)
        child_env.update({str(k): str(v) for k, v in env.items()})
    with subprocess.Popen(
        [find_firedup(), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env,
    ) as p:
        said: List[str] = []

        def relay() -> None:
            # The pipe may be closed under this thread (the interpreter ending after an
            # interrupt), and sys.stderr replaced or closed: neither is worth a traceback.
            try:
                assert p.stderr is not None
                for line in p.stderr:
                    said.append(line)
                    try:
                        sys.stderr.write(line)
                        sys.stderr.flush()
                    except (ValueError, OSError):
                        pass
            except (ValueError, OSError):
                return

        t = threading.Thread(target=relay, daemon=True)
        t.start()
        try:
            assert p.stdout is not None
            out = p.stdout.read()
            code = p.wait()
        except BaseException:
            _end(p, stop_within + _STOP_SLACK_S)
            t.join(timeout=5)
            raise
        t.join()
    return subprocess.CompletedProcess(p.args, code, out, "".join(said))


def _end(p: "subprocess.Popen[str]", within: float) -> None:
    """Ends firedup ``p``: SIGTERM (it stops its run, checks it gone, and exits), a bounded wait,
    then SIGKILL (its run's supervisor still stops the run when its owner ends)."""
    if p.poll() is not None:
        return
    try:
        p.send_signal(signal.SIGTERM)
        # Its last words must not block it on a full pipe while it is waited for.
        if p.stdout is not None:
            threading.Thread(target=p.stdout.read, daemon=True).start()
        p.wait(timeout=within)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def _json_or_error(done: "subprocess.CompletedProcess[str]", what: str) -> Dict[str, Any]:
    try:
        obj = json.loads(done.stdout)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        said = done.stderr.strip().splitlines()
        raise FiredupError(
            f"{what} exited {done.returncode} without a JSON answer"
            + (f": {said[-1]}" if said else "")
        )
    return obj


class Server:
    """A started server: ``url``, ``port``, ``pid``, ``log``, ``run_id``, ``name`` and the whole
    JSON ``verdict``. :meth:`stop` stops it and says what the stop found; used as a context
    manager, the exit stops it and raises :class:`LeftBehind` if anything of it is left."""

    def __init__(self, verdict: Mapping[str, Any], grace: Duration = "10s") -> None:
        self.verdict: Dict[str, Any] = dict(verdict)
        self.url: Optional[str] = verdict.get("url")
        self.port: Optional[int] = verdict.get("port")
        self.pid: Optional[int] = verdict.get("pid")
        self.log: str = verdict.get("log", "")
        self.run_id: str = verdict.get("run_id", "")
        self.name: Optional[str] = verdict.get("name")
        self.teardown: Optional[Teardown] = None
        self.kept = False
        self._grace = grace

    def __repr__(self) -> str:
        return f"<firedup.Server {self.run_id} url={self.url} pid={self.pid}>"

    def stop(self, check: bool = True) -> Teardown:
        """Stops the run (SIGTERM, the grace, SIGKILL; also what left its process tree) and
        returns what the stop found; with ``check``, raises :class:`LeftBehind` when something
        is left (:attr:`Teardown.left_nothing`). A second call returns the first stop's findings."""
        if self.teardown is None:
            done = _firedup(
                ["stop", "--json", "--grace", _duration(self._grace), self.run_id],
                stop_within=_seconds(self._grace),
            )
            self.teardown = Teardown.from_json(_json_or_error(done, f"firedup stop {self.run_id}"))
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


def start(command: Sequence[str], **options: Any) -> Server:
    """Launches ``command`` with ``firedup run --json`` and waits for its verdict. The options
    are :func:`launch`'s. Returns the ready :class:`Server` (not stopped on its own: call
    :meth:`Server.stop`, or use :func:`launch`); raises :class:`NotReady` for any other verdict."""
    __tracebackhide__ = True
    args = run_args(command, **options)
    done = _firedup(
        args, stop_within=_seconds(options.get("grace", "10s")), env=options.get("env")
    )
    verdict = _json_or_error(done, "firedup run")
    wanted = "succeeded" if options.get("until") == "exit" else "ready"
    server = Server(verdict, grace=options.get("grace", "10s"))
    if verdict.get("verdict") != wanted:
        # The caller gets no handle on a server that is not ready: none may be left running.
        left = server.stop(check=False) if verdict.get("server_running") else None
        raise NotReady(verdict, left)
    return server


@contextlib.contextmanager
def launch(
    command: Sequence[str],
    *,
    profile: Optional[str] = None,
    port: Union[None, int, Literal["auto"]] = None,
    timeout: Optional[Duration] = None,
    ready_line: Union[None, str, Sequence[str]] = None,
    fail_line: Union[None, str, Sequence[str]] = None,
    http: Optional[str] = None,
    stall: Optional[Duration] = None,
    until: str = "ready",
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    log: Optional[str] = None,
    name: Optional[str] = None,
    grace: Duration = "10s",
    keep: bool = False,
    owner: Owner = True,
    extra_args: Sequence[str] = (),
) -> Iterator[Server]:
    """Starts ``command`` under firedup, yields the ready :class:`Server`, and on exit stops it
    and verifies that nothing of it is left (:class:`LeftBehind` otherwise; ``keep=True`` leaves
    it running, so it has no owner unless ``owner`` names one).

    ``owner`` (default: this process) is the process whose end stops the run, however it ends
    (SIGKILL included): a test session killed by its CI's timeout takes its servers with it.

    ``port="auto"``: firedup picks a free port, puts it in place of every ``{port}`` in
    ``command`` and in ``FIREDUP_PORT``, and waits until the server's own processes listen there.
    ``profile``, ``timeout``, ``ready_line``, ``fail_line``, ``http``, ``stall``, ``until``,
    ``env``, ``cwd``, ``log``, ``name`` and ``grace`` are ``firedup run``'s flags; ``extra_args``
    are more of them, as written on its command line. A verdict other than ready raises
    :class:`NotReady`, whose message is the verdict block.
    """
    __tracebackhide__ = True
    server = start(
        command,
        profile=profile,
        port=port,
        timeout=timeout,
        ready_line=ready_line,
        fail_line=fail_line,
        http=http,
        stall=stall,
        until=until,
        env=env,
        cwd=cwd,
        log=log,
        name=name,
        grace=grace,
        owner=None if keep and owner is True else owner,
        extra_args=extra_args,
    )
    if keep:
        server.keep()
    with server:
        yield server
