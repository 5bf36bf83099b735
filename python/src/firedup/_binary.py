"""Where the firedup binary is: ``$FIREDUP_BIN`` when set (a binary of your choice wins, e.g. a
development build), else the one this wheel installed (its scripts directory: ``bin/`` of a
virtualenv), else ``firedup`` on ``PATH``."""

from __future__ import annotations

import os
import shutil
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Optional

__all__ = ["find_firedup", "FiredupNotFound"]


class FiredupNotFound(RuntimeError):
    """No firedup binary: not in this package's wheel, not ``$FIREDUP_BIN``, not on ``PATH``."""


def _from_wheel() -> Optional[Path]:
    # The file the installed distribution recorded (RECORD) is the binary this package shipped.
    try:
        files = metadata.distribution("firedup").files or []
    except metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == "firedup" and f.parent.name in ("bin", "scripts", "Scripts"):
            p = Path(str(f.locate()))
            if p.is_file() and os.access(p, os.X_OK):
                return p.resolve()
    # A scheme whose RECORD is not there (an editable install): the scripts directory.
    for scheme in (sysconfig.get_default_scheme(), f"{os.name}_user"):
        try:
            scripts = sysconfig.get_path("scripts", scheme)
        except KeyError:
            continue
        p = Path(scripts) / "firedup"
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def find_firedup() -> str:
    """The path of the firedup binary to run (see the module doc for the order)."""
    env = os.environ.get("FIREDUP_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise FiredupNotFound(
                f"FIREDUP_BIN={env} is not an executable file: set it to the path of a firedup binary"
            )
        return env
    found = _from_wheel()
    if found is not None:
        return str(found)
    on_path = shutil.which("firedup")
    if on_path:
        return on_path
    raise FiredupNotFound(
        "no firedup binary found: install the firedup wheel (pip install firedup-*.whl), "
        "set FIREDUP_BIN to its path, or put firedup on PATH"
    )
