"""firedup from Python: start the servers a test suite needs and get one verdict that cannot be
mistaken (ready, or failed with its signature and decisive line) instead of a timeout.

::

    with firedup.launch(["python", "-m", "http.server", "{port}"], port="auto") as server:
        urllib.request.urlopen(server.url)

The work is done by the firedup binary this wheel carries (``firedup run --json``, ``firedup
stop --json``); see :func:`find_firedup` for where it is looked for. The pytest plugin
(``firedup.pytest_plugin``) gives the ``firedup_server`` fixture factory (type it as
:class:`firedup.pytest_plugin.ServerFactory`). The package is typed (``py.typed``): ``launch``
and ``start`` take one typed keyword per ``firedup run`` flag, ``until`` is ``Literal["ready",
"exit"]``, ``Server.port`` / ``Server.url`` are ``int`` / ``str``.
"""

from ._binary import FiredupNotFound, find_firedup
from ._errors import FiredupError, JobFailed, NoAddress, NotReady
from ._launch import Server, launch, start
from ._run_args import Duration, Owner, ReadyRequest, Until
from ._teardown import LeftBehind, ServersLeftBehind, Teardown
from ._verdict import verdict_block

__all__ = [
    "Duration",
    "FiredupError",
    "FiredupNotFound",
    "JobFailed",
    "LeftBehind",
    "NoAddress",
    "NotReady",
    "Owner",
    "ReadyRequest",
    "Server",
    "ServersLeftBehind",
    "Teardown",
    "Until",
    "find_firedup",
    "launch",
    "start",
    "verdict_block",
]
