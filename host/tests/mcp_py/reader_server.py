"""A small stdio MCP server: one tool that reads a file."""
try:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP
except ModuleNotFoundError:  # mcp 2.x renamed it
    from mcp.server.mcpserver import MCPServer as FastMCP

server = FastMCP("reader")


@server.tool()
def read_file(path: str) -> str:
    """Returns the text of the file at `path`."""
    with open(path) as f:
        return f.read()


if __name__ == "__main__":
    server.run()
