"""kernel-sandbox: the `sandbox` command (kernel-enforced confinement for the commands agents
run) and a typed client for `sandbox serve`.

    from kernel_sandbox import SandboxServer
    with SandboxServer() as sb:                 # the `sandbox` this package installed
        r = sb.run(["/bin/echo", "hi"])
        print(r.exit_code, r.stdout)

The client itself is `kernel_sandbox.client` (the repository's examples/python/sandbox_client.py);
this module adds only where the binary is: the wheel installs `sandbox` into the scripts
directory of the environment (a venv's bin/), which is not on PATH unless the venv is active.
"""
from __future__ import annotations

import os
import shutil
import sysconfig
from typing import List, Optional

from .client import ExecResult, RequestRejected, Violation
from .client import SandboxServer as _Server

__all__ = ["ExecResult", "RequestRejected", "SandboxServer", "Violation", "binary"]


def _candidates() -> List[str]:
    # The scheme pip installed into: the environment's own (a venv, or the system), then the
    # user's (`pip install --user`).
    dirs = [sysconfig.get_path("scripts")]
    user = f"{os.name}_user"
    if user in sysconfig.get_scheme_names():
        dirs.append(sysconfig.get_path("scripts", user))
    return [os.path.join(d, "sandbox") for d in dirs if d]


def binary() -> str:
    """The `sandbox` executable: the one this package installed, else the first on PATH.

    Raises FileNotFoundError naming the places looked in when there is none: a client that
    silently ran some other program would not be confining anything it was asked to.
    """
    for path in _candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which("sandbox")
    if found:
        return found
    raise FileNotFoundError(
        "no sandbox binary: not in " + ", ".join(_candidates())
        + " nor on PATH; reinstall kernel-sandbox or pass SandboxServer(sandbox=PATH)"
    )


class SandboxServer(_Server):
    """`kernel_sandbox.client.SandboxServer`, defaulting to the installed binary."""

    def __init__(self, sandbox: Optional[str] = None, max_concurrent: Optional[int] = None):
        super().__init__(binary() if sandbox is None else sandbox, max_concurrent)
