"""Drives one stdio MCP server with the official MCP Python SDK (`pip install mcp`).

argv[1] names a file holding a JSON object: `command`, `args`, `env` (the server's), `calls` (a list of
steps). Prints one JSON object: the `initialize` result, the `tools/list` result and, per step,
its outcome: for {"tool", "arguments"} the `CallToolResult` or the error the SDK raised, each as
the wire JSON (camelCase), so that the Rust test reads one format whatever the SDK's major
version. The string "$last" in a call's arguments is the process id of the last `start`.

Other steps: {"parallel": [steps]} runs them at once and reports their outcomes and the order
they ended in; a call with "cancel_after": S is cancelled by the client after S seconds (the
SDK then sends `notifications/cancelled`); {"sleep": S}; {"procs": MARKER, "after": S} counts,
S seconds later, the processes whose command line contains MARKER; {"wait_gone": MARKER, "timeout": S} waits for
there to be none.
"""

import os
import time

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def wire(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    params = StdioServerParameters(command=cfg["command"], args=cfg["args"], env=cfg["env"])
    out = {"calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            out["initialize"] = wire(await session.initialize())
            out["tools"] = wire(await session.list_tools())
            state = {"last": None}
            for step in cfg.get("calls", []):
                out["calls"].append(await run_step(session, state, step))
            closing = time.monotonic()
    # How long the server took to exit once its stdin was closed (the SDK waits for it, and
    # terminates it after a grace period of its own).
    out["close_s"] = time.monotonic() - closing
    print(json.dumps(out))


def procs(marker):
    """How many processes have `marker` in their command line."""
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read().replace(b"\0", b" "):
                    n += 1
        except OSError:
            pass
    return n


def substitute(value, state):
    if value == "$last":
        return state["last"]
    if isinstance(value, dict):
        return {k: substitute(v, state) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, state) for v in value]
    return value


async def run_step(session, state, step):
    start = time.monotonic()
    if "parallel" in step:
        order = []

        async def one(i, s):
            r = await run_step(session, state, s)
            order.append(i)
            return r

        results = await asyncio.gather(*(one(i, s) for i, s in enumerate(step["parallel"])))
        return {"parallel": list(results), "order": order}
    if "sleep" in step:
        await asyncio.sleep(step["sleep"])
        return {"slept": step["sleep"]}
    if "procs" in step:
        await asyncio.sleep(step.get("after", 0))
        return {"procs": procs(step["procs"])}
    if "wait_gone" in step:
        deadline = start + step.get("timeout", 5)
        while procs(step["wait_gone"]) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return {"gone": procs(step["wait_gone"]) == 0, "after_s": time.monotonic() - start}
    try:
        call = session.call_tool(step["tool"], substitute(step.get("arguments"), state))
        if "cancel_after" in step:
            try:
                result = await asyncio.wait_for(call, step["cancel_after"])
            except asyncio.TimeoutError:
                return {"cancelled": True, "elapsed_s": time.monotonic() - start}
        else:
            result = await call
        r = wire(result)
        if step["tool"] == "start":
            state["last"] = (r.get("structuredContent") or {}).get("process_id")
        r["elapsed_s"] = time.monotonic() - start
        return r
    except Exception as e:  # the SDK raises JSON-RPC errors; report them as data
        error = getattr(e, "error", None)
        code = getattr(error, "code", None)
        if code is None:
            code = getattr(e, "code", None)
        return {"exception": type(e).__name__, "message": str(e), "code": code}


asyncio.run(main())
