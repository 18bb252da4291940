#!/usr/bin/env python3
"""Drive one `sandbox serve` process from Python: send three requests, read results by id.

Usage: serve_example.py [PATH-TO-sandbox]   (default: `sandbox` from PATH)
"""
import json
import subprocess
import sys

sandbox = sys.argv[1] if len(sys.argv) > 1 else "sandbox"
server = subprocess.Popen(
    [sandbox, "serve"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    text=True,
    bufsize=1,  # line-buffered: each request leaves as soon as it is written
)

requests = {
    "greet": {"argv": ["/bin/echo", "hello"]},
    "count": {"argv": ["/bin/bash", "-c", "ls / | wc -l"], "profile": "shell"},
    "net": {"argv": ["/usr/bin/python3", "-c", "import socket; socket.socket()"]},
}
for rid, req in requests.items():
    server.stdin.write(json.dumps({"id": rid, **req}) + "\n")
server.stdin.close()  # EOF: the server answers what is running, then exits

results = {}
for line in server.stdout:  # one line per request, in completion order
    msg = json.loads(line)
    results[msg["id"]] = msg
if server.wait() != 0:
    sys.exit(f"sandbox serve exited with {server.returncode}")

for rid in requests:
    r = results[rid]
    if "error" in r:
        print(f"{rid}: refused: {r['error']['field']}: {r['error']['reason']}")
    elif r["violation"]:  # only with "on_violation": "kill"
        print(f"{rid}: stopped: {r['violation']['syscall']}")
    else:
        print(f"{rid}: exit {r['exit_code']}: {r['stdout'].strip()}")
        for v in r["violations"]:  # refused calls failed with an errno; the program went on
            print(f"  refused {v['syscall']} x{v['count']}: {v['change']}")
