// The few Node.js declarations the example uses, so that it compiles with a bare `tsc`
// (no @types/node download: builds stay offline). With @types/node installed, delete this file.
declare module "child_process" {
  interface Writable {
    write(chunk: string): boolean;
    end(): void;
  }
  interface Readable {
    setEncoding(enc: string): void;
    on(event: "data", cb: (chunk: string) => void): void;
    on(event: "end", cb: () => void): void;
  }
  export interface ChildProcess {
    stdin: Writable;
    stdout: Readable;
    on(event: "exit", cb: (code: number | null, signal: string | null) => void): void;
    on(event: "error", cb: (err: Error) => void): void;
  }
  export function spawn(
    command: string,
    args: string[],
    options: { stdio: ["pipe", "pipe", "inherit"] },
  ): ChildProcess;
}
declare const process: {
  argv: string[];
  exitCode: number | undefined;
  stdout: { write(s: string): boolean };
};
declare module "path" {
  export function join(...parts: string[]): string;
}
declare const require: { main: unknown };
declare const module: unknown;
declare const __dirname: string;
