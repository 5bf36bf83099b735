"""What ``firedup stop --json`` found (docs/contract.md, "stop --json"), and the exceptions for a
stop that found something of a run left: :class:`LeftBehind` (one run), :class:`ServersLeftBehind`
(several)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = ["LeftBehind", "ServersLeftBehind", "Teardown"]


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
