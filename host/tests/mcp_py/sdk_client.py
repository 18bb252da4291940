"""Drives one stdio MCP server with the official MCP Python SDK (`pip install mcp`).

argv[1] names a file holding a JSON object: `command`, `args`, `env` (the server's), `calls` (a list of
{"tool", "arguments"}). Prints one JSON object: the `initialize` result, the `tools/list`
result and, per call, the `CallToolResult` or the error the SDK raised, each as the wire
JSON (camelCase), so that the Rust test reads one format whatever the SDK's major version.
"""

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
            for call in cfg.get("calls", []):
                try:
                    result = await session.call_tool(call["tool"], call.get("arguments"))
                    out["calls"].append(wire(result))
                except Exception as e:  # the SDK raises JSON-RPC errors; report them as data
                    error = getattr(e, "error", None)
                    code = getattr(error, "code", None)
                    if code is None:
                        code = getattr(e, "code", None)
                    out["calls"].append(
                        {"exception": type(e).__name__, "message": str(e), "code": code}
                    )
    print(json.dumps(out))


asyncio.run(main())
