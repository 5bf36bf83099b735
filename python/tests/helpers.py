"""What the suite's tests share: a port held by this process, a Redis PING, the processes of a
run found by the FIREDUP_RUN_ID in their environment."""

from __future__ import annotations

import os
import socket
from typing import List


def held_port() -> socket.socket:
    """A socket listening on a free port of 127.0.0.1: a server started there cannot bind."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


def redis_ping(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(b"PING\r\n")
        return c.recv(64)


def processes_of_run(run_id: str) -> List[int]:
    """The pids whose environment carries ``FIREDUP_RUN_ID=run_id``."""
    needle = f"FIREDUP_RUN_ID={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            found.append(int(entry))
    return found


def port_is_free(port: int) -> bool:
    """A server could listen on ``port`` again (SO_REUSEADDR, as servers bind: a connection of
    the test's own in TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
