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


def _duration(d: Duration) -> str:
    return d if isinstance(d, str) else f"{d}s"


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
    extra_args: Sequence[str] = (),
) -> List[str]:
    """The arguments of ``firedup run --json`` for these options (the binary not included)."""
    if isinstance(command, str):
        raise TypeError("command is a list of arguments, e.g. ['python', '-m', 'http.server', '{port}']")
    a = ["run", "--json", "--until", until, "--grace", _duration(grace)]
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
    for k, v in (env or {}).items():
        a += ["--env", f"{k}={v}"]
    if cwd is not None:
        a += ["--cwd", str(cwd)]
    if log is not None:
        a += ["--log", str(log)]
    if name is not None:
        a += ["--name", name]
    a += list(extra_args)
    return a + ["--", *[str(c) for c in command]]


def _firedup(args: Sequence[str]) -> "subprocess.CompletedProcess[str]":
    """Runs firedup to its end. Its progress (stderr) is passed on line by line as it comes, to
    ``sys.stderr`` (where pytest captures it, to show with a failure), and kept for the error."""
    with subprocess.Popen(
        [find_firedup(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as p:
        said: List[str] = []

        def relay() -> None:
            assert p.stderr is not None
            for line in p.stderr:
                said.append(line)
                sys.stderr.write(line)
                sys.stderr.flush()

        t = threading.Thread(target=relay, daemon=True)
        t.start()
        assert p.stdout is not None
        out = p.stdout.read()
        code = p.wait()
        t.join()
    return subprocess.CompletedProcess(p.args, code, out, "".join(said))


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
            done = _firedup(["stop", "--json", "--grace", _duration(self._grace), self.run_id])
            self.teardown = Teardown.from_json(_json_or_error(done, f"firedup stop {self.run_id}"))
        if check and not self.teardown.left_nothing:
            raise LeftBehind(self.run_id, self.teardown)
        return self.teardown

    def keep(self) -> None:
        """Leaves the server running: the context manager's exit does not stop it
        (``firedup stop RUN_ID`` does)."""
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
    done = _firedup(args)
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
    extra_args: Sequence[str] = (),
) -> Iterator[Server]:
    """Starts ``command`` under firedup, yields the ready :class:`Server`, and on exit stops it
    and verifies that nothing of it is left (:class:`LeftBehind` otherwise; ``keep=True`` leaves
    it running).

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
        extra_args=extra_args,
    )
    if keep:
        server.keep()
    with server:
        yield server
