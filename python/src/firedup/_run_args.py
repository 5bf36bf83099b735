"""The arguments of ``firedup run --json`` for the keyword arguments of :func:`firedup.start` /
:func:`firedup.launch`: one keyword per ``run`` flag that makes sense from Python (``RUN_FLAGS``
says which flag each is, ``NOT_FROM_PYTHON`` why the others are not), with the types a type
checker can hold a caller to. Durations are written as firedup's flags parse them."""

from __future__ import annotations

import math
import os
from datetime import timedelta
from typing import Dict, List, Literal, Mapping, Optional, Sequence, Union

__all__ = [
    "Duration",
    "Owner",
    "PathArg",
    "ReadyRequest",
    "Until",
    "NOT_FROM_PYTHON",
    "RUN_FLAGS",
    "duration_flag",
    "run_args",
    "seconds",
]

Duration = Union[str, int, float, timedelta]
"""A duration: as firedup's flags take it (``"250ms"``, ``"90s"``, ``"1h30m"``, ``"off"`` where
the flag allows it), or seconds (an int or float), or a :class:`datetime.timedelta`."""

Until = Literal["ready", "exit"]
"""``"ready"``: a server, the verdict ``ready``; ``"exit"``: a job, watched until it exits
(``succeeded``, or :class:`firedup.JobFailed`)."""

ReadyRequest = Union[bool, Literal["openai", "tgi"]]
"""``--ready-request``: ``True`` for the profile's request shape, or the shape by name."""

Owner = Union[int, bool, None]
"""The process whose end stops the run (``firedup run --owner PID``): ``True`` (the default) is
this Python process, an int another pid, ``None`` or ``False`` none (the server may outlive this
process: ``firedup stop RUN_ID`` ends it). With ``host`` or ``slurm`` the default is none (a pid
of this machine means nothing there)."""

PathArg = Union[str, "os.PathLike[str]"]

# The keyword of start/launch for each flag of `firedup run` it sets. tests/test_typed_api.py
# checks this against `firedup run --help`: a new flag needs a keyword here or a reason below.
RUN_FLAGS: Dict[str, str] = {
    "--until": "until",
    "--profile": "profile",
    "--profile-file": "profile_file",
    "--http": "http",
    "--port": "port",
    "--ready-request": "ready_request",
    "--phase-timeout": "phase_timeout",
    "--ready-line": "ready_line",
    "--fail-line": "fail_line",
    "--timeout": "timeout",
    "--stall": "stall",
    "--log-grace": "log_grace",
    "--hold": "hold",
    "--no-probe": "no_probe",
    "--queue-timeout": "queue_timeout",
    "--events": "events",
    "--log": "log",
    "--env": "env",
    "--cwd": "cwd",
    "--notify": "notify",
    "--grace": "grace",
    "--slurm": "slurm",
    "--sbatch-arg": "sbatch_arg",
    "--name": "name",
    "--owner": "owner",
    "--host": "host",
    "--connect-timeout": "connect_timeout",
    "--reconnect-for": "reconnect_for",
}

_GROUP_ONLY = "a multi-node group run (several --host) is the CLI's for now; host takes one"

NOT_FROM_PYTHON: Dict[str, str] = {
    "--json": "always given: the API reads the JSON verdict",
    "--then": "the code after start() or inside the with block is what runs after ready",
    "--keep": "launch(keep=True) and Server.keep() leave the server running",
    "--detach": "start() returns once the verdict is in; detached runs are the CLI's",
    "--help": "not a run option",
    "--master-addr": _GROUP_ONLY,
    "--master-port": _GROUP_ONLY,
    "--ready-on": _GROUP_ONLY,
}


def duration_flag(d: Duration) -> str:
    """``d`` as a firedup duration flag's value (seconds written out, never in exponent form)."""
    if isinstance(d, str):
        return d
    if isinstance(d, bool):
        raise TypeError("a duration is a str ('90s'), seconds (int or float) or a timedelta, not a bool")
    s = d.total_seconds() if isinstance(d, timedelta) else float(d)
    if not math.isfinite(s) or s < 0:
        raise ValueError(f"duration {d!r}: seconds must be finite and not negative")
    if s == int(s):
        return f"{int(s)}s"
    return f"{s:.6f}".rstrip("0").rstrip(".") + "s"


def seconds(d: Duration, unknown: float = 10.0) -> float:
    """``d`` in seconds, for a bound of this side's own (``unknown`` when it cannot be read)."""
    if not isinstance(d, str):
        return float(duration_flag(d)[:-1])
    total, number = 0.0, ""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
    rest = d.strip()
    while rest:
        n = len(rest) - len(rest.lstrip("0123456789."))
        number, rest = rest[:n], rest[n:]
        u = len(rest) - len(rest.lstrip("abcdefghijklmnopqrstuvwxyz"))
        unit, rest = rest[:u] or "s", rest[u:]
        try:
            total += float(number) * units[unit]
        except (ValueError, KeyError):
            return unknown
    return total if d.strip() else unknown


def _many(x: Union[None, str, Sequence[str]]) -> List[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else [str(i) for i in x]


def _paths(x: Union[None, PathArg, Sequence[PathArg]]) -> List[str]:
    if x is None:
        return []
    if isinstance(x, (str, os.PathLike)):
        return [os.fspath(x)]
    return [os.fspath(p) for p in x]


def run_args(
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
) -> List[str]:
    """The arguments of ``firedup run --json`` for these options (the binary not included).
    ``env`` gives only its names (``--env KEY``): firedup must get the values in its environment
    (``run_firedup(..., env=env)``)."""
    if isinstance(command, str):
        raise TypeError("command is a list of arguments, e.g. ['python', '-m', 'http.server', '{port}']")
    if until not in ("ready", "exit"):
        raise ValueError(f"until={until!r}: 'ready' (a server) or 'exit' (a job)")
    a = ["run", "--json", "--until", until, "--grace", duration_flag(grace)]
    owner_pid = _owner_pid(owner, host is not None or slurm, extra_args)
    if owner_pid is not None:
        a += ["--owner", str(owner_pid)]
    if profile is not None:
        a += ["--profile", profile]
    for f in _paths(profile_file):
        a += ["--profile-file", f]
    if port is not None:
        a += ["--port", str(port)]
    if http is not None:
        a += ["--http", http]
    if ready_request is True:
        a += ["--ready-request"]
    elif ready_request:
        a += [f"--ready-request={ready_request}"]
    for phase, d in (phase_timeout or {}).items():
        a += ["--phase-timeout", f"{phase}={duration_flag(d)}"]
    for r in _many(ready_line):
        a += ["--ready-line", r]
    for r in _many(fail_line):
        a += ["--fail-line", r]
    for flag, value in (
        ("--timeout", timeout),
        ("--stall", stall),
        ("--log-grace", log_grace),
        ("--hold", hold),
        ("--queue-timeout", queue_timeout),
        ("--connect-timeout", connect_timeout),
        ("--reconnect-for", reconnect_for),
    ):
        if value is not None:
            a += [flag, duration_flag(value)]
    if no_probe:
        a += ["--no-probe"]
    if notify:
        a += ["--notify"]
    if slurm:
        a += ["--slurm"]
    for s in _many(sbatch_arg):
        a += [f"--sbatch-arg={s}"]
    # Only the names: the values travel in firedup's own environment (``run_firedup``'s ``env``),
    # never in its argv, which every user of the machine reads in ``ps``.
    for k in env or {}:
        a += ["--env", str(k)]
    for flag, path in (("--cwd", cwd), ("--log", log), ("--events", events)):
        if path is not None:
            a += [flag, os.fspath(path)]
    if name is not None:
        a += ["--name", name]
    if host is not None:
        a += ["--host", host]
    a += list(extra_args)
    return a + ["--", *[str(c) for c in command]]


def _owner_pid(owner: Owner, elsewhere: bool, extra_args: Sequence[str]) -> Optional[int]:
    """The pid for ``--owner``: this process by default, unless the run goes to another machine
    (``host``, ``slurm``, or ``--host`` / ``--slurm`` in ``extra_args``), where a pid of this one
    means nothing."""
    if owner is None or owner is False:
        return None
    if owner is True:
        elsewhere = elsewhere or any(
            a in ("--host", "--slurm") or a.startswith("--host=") for a in extra_args
        )
        return None if elsewhere else os.getpid()
    return int(owner)
