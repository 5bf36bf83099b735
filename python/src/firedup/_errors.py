"""What a start raises: :class:`FiredupError` when firedup itself failed or was called wrongly;
:class:`NotReady` when the verdict is not the one asked for, and :class:`JobFailed`, a
:class:`NotReady`, when that was a job (``until="exit"``) that did not succeed; each carries the
JSON verdict and its block as the message. :class:`NoAddress` is asking a server for the port or
URL it does not have."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ._teardown import Teardown
from ._verdict import verdict_block

__all__ = ["FiredupError", "JobFailed", "NoAddress", "NotReady"]


class FiredupError(RuntimeError):
    """firedup itself failed or was called wrongly: its message is firedup's sentence."""


class NotReady(Exception):
    """The server did not become ready: ``verdict`` is the JSON verdict, the message its block.
    ``teardown`` is the stop made here when firedup had left the server running (after
    ``monitor_error``, firedup's own probe failing, it does not stop a server it cannot judge)."""

    def __init__(self, verdict: Mapping[str, Any], teardown: Optional[Teardown] = None) -> None:
        block = verdict_block(verdict)
        if teardown is not None:
            block += f"\n  stopped: {teardown.description}"
        super().__init__(block)
        self.verdict: Dict[str, Any] = dict(verdict)
        self.teardown = teardown

    @property
    def signature(self) -> Optional[str]:
        """The failure signature (``port_in_use``, ``cuda_oom`` ...), or None."""
        s = self.verdict.get("signature")
        return None if s is None else str(s)


class JobFailed(NotReady):
    """A job (``until="exit"``) did not succeed: it exited non-zero, was killed, matched a fatal
    signature, timed out... (``verdict["verdict"]``, ``verdict["exit"]``). A :class:`NotReady`,
    so code that catches that still catches it."""


class NoAddress(AttributeError):
    """:attr:`Server.port` or :attr:`Server.url` of a run whose verdict has none (readiness by a
    log line alone, with no ``port`` or ``http``). An AttributeError, so ``getattr(server,
    "url", None)`` gives None for such a server."""
