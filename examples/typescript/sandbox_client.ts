// A typed client for `sandbox serve` on Node.js: one long-lived server, JSON lines over its
// stdin and stdout, results matched to requests by id. No npm dependencies.
//
//   tsc -p . && node dist/sandbox_client.js [PATH-TO-sandbox]
//
// runs three requests at once: an allowed one, one whose refused call is reported, and one the
// server rejects.
import { spawn, ChildProcess } from "child_process";

/** One exec request (docs/exec.md); the client adds `id`. */
export interface ExecRequest {
  argv: string[];
  profile?: string;
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string;
  timeout_s?: number;
  [field: string]: unknown;
}

/** A system call the profile refused, and what would allow it. */
export interface Violation {
  syscall: string;
  number: number | null;
  profile: string;
  hint: string;
  count?: number;
  program?: string;
  change?: string;
}

/** What happened to a request that ran. */
export interface ExecResult {
  exit_code: number | null;
  signal: number | null;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  duration_s: number;
  timed_out: boolean;
  cancelled: boolean;
  /** The call that ended the program (on_violation "kill"). */
  violation: Violation | null;
  /** Refused calls that failed with an errno while the program went on. */
  violations?: Violation[];
  warnings: string[];
}

/** The server did not run the request: which field, and why. */
export class RequestRejected extends Error {
  constructor(public field: string, public reason: string) {
    super(`${field}: ${reason}`);
  }
}

type Pending = { resolve: (r: ExecResult) => void; reject: (e: Error) => void };

export class SandboxServer {
  private child: ChildProcess;
  private pending = new Map<string, Pending>();
  private nextId = 0;
  private buffered = "";
  private exited: Promise<number | null>;

  constructor(sandbox = "sandbox", maxConcurrent?: number) {
    const args = ["serve"];
    if (maxConcurrent !== undefined) args.push("--max-concurrent", String(maxConcurrent));
    this.child = spawn(sandbox, args, { stdio: ["pipe", "pipe", "inherit"] });
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk) => this.onData(chunk));
    this.exited = new Promise((resolve) => {
      this.child.on("exit", (code) => {
        for (const p of this.pending.values()) p.reject(new Error("sandbox serve ended"));
        this.pending.clear();
        resolve(code);
      });
      this.child.on("error", (err) => {
        for (const p of this.pending.values()) p.reject(err);
        this.pending.clear();
        resolve(null);
      });
    });
  }

  private onData(chunk: string): void {
    this.buffered += chunk;
    let nl: number;
    while ((nl = this.buffered.indexOf("\n")) >= 0) {
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 1);
      const msg = JSON.parse(line);
      const p = this.pending.get(msg.id);
      if (!p) continue; // an error about a line this client never sent
      this.pending.delete(msg.id);
      if (msg.error) p.reject(new RequestRejected(msg.error.field, msg.error.reason));
      else p.resolve(msg as ExecResult);
    }
  }

  /** Sends one request; resolves with its result, rejects with RequestRejected. */
  run(req: ExecRequest): Promise<ExecResult> {
    const id = `ts-${++this.nextId}`;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.stdin.write(JSON.stringify({ ...req, id }) + "\n");
    });
  }

  /** EOF to the server: it answers what is running, then exits; resolves with its status. */
  close(): Promise<number | null> {
    this.child.stdin.end();
    return this.exited;
  }
}

async function main(): Promise<void> {
  const server = new SandboxServer(process.argv[2] || "sandbox", 2);
  const requests: Record<string, ExecRequest> = {
    echo: { argv: ["/bin/echo", "hello from the sandbox"] },
    socket: { argv: ["/usr/bin/python3", "-c", "import socket; socket.socket()"], profile: "minimal" },
    bad: { argv: ["relative/program"] },
  };
  const names = Object.keys(requests);
  const settled = await Promise.all(
    names.map((n) => server.run(requests[n]).then((r) => ({ r }), (e: Error) => ({ e }))),
  );
  names.forEach((name, i) => {
    const s = settled[i];
    if ("e" in s) {
      const e = s.e;
      const text = e instanceof RequestRejected ? `${e.field}: ${e.reason}` : e.message;
      process.stdout.write(`${name}: refused: ${text}\n`);
      return;
    }
    const r = s.r;
    const v = r.violations && r.violations[0];
    if (r.violation) {
      process.stdout.write(`${name}: stopped: ${r.violation.syscall} (${r.violation.hint})\n`);
    } else if (v) {
      process.stdout.write(`${name}: exit ${r.exit_code}, refused: ${v.syscall} by ${v.program} (${v.hint})\n`);
    } else {
      process.stdout.write(`${name}: exit ${r.exit_code}: ${JSON.stringify(r.stdout)}\n`);
    }
  });
  const status = await server.close();
  process.exitCode = status === 0 ? 0 : 1;
}

// Run as a program, not when imported (the npm package's index.js imports this module).
if (require.main === module) main();
