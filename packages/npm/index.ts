// The kernel-sandbox package's entry point: the client of examples/typescript/sandbox_client.ts,
// defaulting to the `sandbox` binary this package ships (bin/sandbox beside dist/), so that
// `new SandboxServer()` works without the binary on PATH.
import { join } from "path";
import { SandboxServer as Server } from "./sandbox_client";

export { ExecRequest, ExecResult, RequestRejected, Violation } from "./sandbox_client";

/** The `sandbox` executable this package installed. */
export const binary: string = join(__dirname, "..", "bin", "sandbox");

/** `SandboxServer` of the client, defaulting to {@link binary}. */
export class SandboxServer extends Server {
  constructor(sandbox: string = binary, maxConcurrent?: number) {
    super(sandbox, maxConcurrent);
  }
}
