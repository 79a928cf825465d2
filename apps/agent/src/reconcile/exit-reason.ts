// Sentences the tenant reads in statusReason. They say what happened in terms
// of their container, never in Docker's vocabulary alone.
import type { ContainerExit } from "../runtime/types";

const SIGNALS: Record<number, string> = { 1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM" };

export function describeExit(exit: Pick<ContainerExit, "exitCode" | "oomKilled" | "error">, memoryMb?: number): string {
  if (exit.oomKilled) {
    const limit = memoryMb ? ` (limit ${memoryMb} MB)` : "";
    return `the container ran out of memory${limit} and was killed (exit code ${exit.exitCode})`;
  }
  if (exit.error) return `the container stopped with an error: ${exit.error} (exit code ${exit.exitCode})`;
  const signal = exit.exitCode > 128 ? SIGNALS[exit.exitCode - 128] : undefined;
  if (signal) return `the container was killed by ${signal} (exit code ${exit.exitCode})`;
  return `the container exited with code ${exit.exitCode}`;
}
