import type { ContainerRuntime } from "../../src/runtime/container-runtime";
import type { LogLine, LogOptions } from "../../src/runtime/types";

/** All lines a (non-following, or ending) log stream delivers. */
export async function collectLogs(runtime: ContainerRuntime, id: string, options: LogOptions): Promise<LogLine[]> {
  const lines: LogLine[] = [];
  const handle = await runtime.logs(id, options, (line) => lines.push(line));
  await handle.done;
  return lines;
}
