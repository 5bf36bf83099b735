"""Running the firedup binary to its end: its stderr (progress) passed on as it comes, its stdout
(the JSON answer) kept; interrupted here, firedup is stopped and waited for before the exception
goes on. A run without a JSON answer is :class:`FiredupError`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._binary import find_firedup
from ._errors import FiredupError

__all__ = ["json_or_error", "run_firedup"]

# How long firedup run may take to stop a starting server and exit once sent SIGTERM, beyond its
# grace (the stop's SIGKILL and its check that nothing is left).
_STOP_SLACK_S = 30.0


def run_firedup(
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


def json_or_error(done: "subprocess.CompletedProcess[str]", what: str) -> Dict[str, Any]:
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
