"""firedup from Python: start the servers a test suite needs and get one verdict that cannot be
mistaken (ready, or failed with its signature and decisive line) instead of a timeout.

::

    with firedup.launch(["python", "-m", "http.server", "{port}"], port="auto") as server:
        urllib.request.urlopen(server.url)

The work is done by the firedup binary this wheel carries (``firedup run --json``, ``firedup
stop --json``); see :func:`find_firedup` for where it is looked for. The pytest plugin
(``firedup.pytest_plugin``) gives the ``firedup_server`` fixture factory.
"""

from ._binary import FiredupNotFound, find_firedup
from ._launch import (
    FiredupError,
    LeftBehind,
    NotReady,
    Server,
    ServersLeftBehind,
    Teardown,
    launch,
    start,
)
from ._verdict import verdict_block

__all__ = [
    "FiredupError",
    "FiredupNotFound",
    "LeftBehind",
    "NotReady",
    "Server",
    "ServersLeftBehind",
    "Teardown",
    "find_firedup",
    "launch",
    "start",
    "verdict_block",
]
