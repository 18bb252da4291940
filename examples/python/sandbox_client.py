#!/usr/bin/env python3
"""A typed client for `sandbox serve`: one long-lived server, requests from any thread,
results as dataclasses. Standard library only (Python 3.8+).

    with SandboxServer("/usr/local/bin/sandbox") as sb:
        r = sb.run(["/bin/echo", "hi"])            # ExecResult
        print(r.exit_code, r.stdout)

Run this file to see three requests run at once: an allowed one, one whose refused call is
reported, and one the server rejects:  python3 sandbox_client.py [PATH-TO-sandbox]
"""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Violation:
    """A system call the profile refused, and what would allow it."""

    syscall: str
    number: Optional[int]
    profile: str
    hint: str
    count: int = 1
    program: str = ""
    change: str = ""


@dataclass(frozen=True)
class ExecResult:
    """What happened to a request that ran (docs/exec.md, "Result")."""

    exit_code: Optional[int]
    signal: Optional[int]
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    cancelled: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    #: The call that ended the program (on_violation "kill").
    violation: Optional[Violation] = None
    #: Refused calls that failed with an errno while the program went on.
    violations: List[Violation] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.violation is None


class RequestRejected(Exception):
    """The server did not run the request: which field, and why."""

    def __init__(self, field_name: str, reason: str):
        super().__init__(f"{field_name}: {reason}")
        self.field = field_name
        self.reason = reason


def _violation(d: Dict[str, Any]) -> Violation:
    known = {f.name for f in fields(Violation)}
    return Violation(**{k: v for k, v in d.items() if k in known})


def _result(d: Dict[str, Any]) -> ExecResult:
    # Fields the server may add later are ignored; the known ones are typed.
    known = {f.name for f in fields(ExecResult)}
    values = {k: v for k, v in d.items() if k in known}
    if d.get("violation"):
        values["violation"] = _violation(d["violation"])
    values["violations"] = [_violation(v) for v in d.get("violations") or []]
    return ExecResult(**values)


class SandboxServer:
    """One `sandbox serve` child process; `run` may be called from many threads at once."""

    def __init__(self, sandbox: str = "sandbox", max_concurrent: Optional[int] = None):
        args = [sandbox, "serve"]
        if max_concurrent is not None:
            args += ["--max-concurrent", str(max_concurrent)]
        self._proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,  # line-buffered: a request leaves as soon as it is written
        )
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: Dict[str, Future] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:  # one line per request, in completion order
            msg = json.loads(line)
            with self._lock:
                fut = self._pending.pop(msg.get("id"), None)
            if fut is None:
                continue
            if "error" in msg:
                fut.set_exception(RequestRejected(msg["error"]["field"], msg["error"]["reason"]))
            else:
                fut.set_result(_result(msg))
        with self._lock:
            for fut in self._pending.values():
                fut.set_exception(RuntimeError("sandbox serve ended"))
            self._pending.clear()

    def submit(self, argv: List[str], **request: Any) -> "Future[ExecResult]":
        """Sends a request (any exec request field: profile, timeout_s, stdin, cwd, env...)."""
        rid = f"py-{next(self._ids)}"
        fut: Future = Future()
        with self._lock:
            self._pending[rid] = fut
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps({"id": rid, "argv": argv, **request}) + "\n")
        return fut

    def run(self, argv: List[str], **request: Any) -> ExecResult:
        """Runs one request and waits for its result; RequestRejected if it did not run."""
        return self.submit(argv, **request).result()

    def close(self) -> int:
        """EOF to the server: it answers what is running, then exits; returns its status."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._reader.join()
        return self._proc.wait()

    def __enter__(self) -> "SandboxServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def main() -> int:
    sandbox = sys.argv[1] if len(sys.argv) > 1 else "sandbox"
    requests = {
        "echo": (["/bin/echo", "hello from the sandbox"], {}),
        "socket": (["/usr/bin/python3", "-c", "import socket; socket.socket()"], {"profile": "minimal"}),
        "bad": (["relative/program"], {}),
    }
    with SandboxServer(sandbox, max_concurrent=2) as sb, ThreadPoolExecutor(3) as pool:
        futures = {name: pool.submit(sb.run, argv, **req) for name, (argv, req) in requests.items()}
        for name, fut in futures.items():
            try:
                r = fut.result()
            except RequestRejected as e:
                print(f"{name}: refused: {e.field}: {e.reason}")
                continue
            if r.violation:
                print(f"{name}: stopped: {r.violation.syscall} ({r.violation.hint})")
            elif r.violations:
                v = r.violations[0]
                print(f"{name}: exit {r.exit_code}, refused: {v.syscall} by {v.program} ({v.hint})")
            else:
                print(f"{name}: exit {r.exit_code}: {r.stdout!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
