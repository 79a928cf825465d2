// Runs a program to its end: the only way the egress module touches the host.
import { spawn } from "node:child_process";

export interface CommandResult {
  /** the exit status; 127 when the program is not installed */
  code: number;
  stdout: string;
  stderr: string;
}

export type CommandRunner = (command: string, args: string[], input?: string) => Promise<CommandResult>;

export const spawnCommand: CommandRunner = (command, args, input) =>
  new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", (error: NodeJS.ErrnoException) => resolve({ code: error.code === "ENOENT" ? 127 : 1, stdout, stderr: stderr || error.message }));
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.on("error", () => {}); // a program that exits without reading its input
    child.stdin.end(input ?? "");
  });
