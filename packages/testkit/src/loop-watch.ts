// A setup file (vitest.config.ts's setupFiles) that names the test holding its
// worker's event loop. The worker answers the main process over an RPC whose
// calls time out after 60 s (birpc's default): after a synchronous block that
// long (execFileSync of docker, pg_ctl or tar; a busy loop) Node runs the due
// timers before it reads the reply, and the run fails with "[vitest-worker]:
// Timeout calling onTaskUpdate" though every test passed, naming no file. A
// block of BLOCKED_MS is well short of that, so the line below comes first and
// says where to look. It only writes to stderr: it never fails a test, and its
// timer is unref'd so it never keeps a worker alive.
import { relative } from "node:path";
import { afterEach, beforeEach, expect } from "vitest";

export const BLOCKED_MS = 10_000;
const TICK_MS = 250;

/** Where in its file a worker was, in words. */
export interface Whereabouts {
  /** the full name of the test between its beforeEach and afterEach */
  readonly running?: string;
  /** the last test that finished, when none is running */
  readonly last?: string;
}

export function describeWhere({ running, last }: Whereabouts): string {
  if (running !== undefined) return `in test "${running}"`;
  if (last !== undefined) return `after test "${last}" (its afterEach, the next one's beforeEach, or afterAll)`;
  return "before its first test (imports, collection or beforeAll)";
}

export interface Block {
  readonly file: string;
  readonly blockedMs: number;
  /** CPU this process spent in the gap: near the gap when it computed, near 0 when it waited on a child process or lacked a core */
  readonly cpuMs: number;
  readonly before: Whereabouts;
  readonly after: Whereabouts;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Pure: the one stderr line for a block. */
export function blockLine({ file, blockedMs, cpuMs, before, after }: Block): string {
  const from = describeWhere(before);
  const to = describeWhere(after);
  const where = from === to ? from : `from ${from} to ${to}`;
  return `[loop-watch] ${file}: the worker's event loop was blocked ${seconds(blockedMs)} (${seconds(cpuMs)} of it on its CPU) ${where}; at 60 s vitest fails the run with "Timeout calling onTaskUpdate"\n`;
}

// Shared by every evaluation of this file in one process (vitest runs setup
// files again for each test file a worker takes), so there is one timer.
interface Watch {
  /** Reports a block since the last look, then starts the next span from `where`. */
  look(where: Whereabouts, ticked: boolean): void;
  where: Whereabouts;
}
const WATCH = Symbol.for("cm.testkit.loop-watch");
const holder = globalThis as { [WATCH]?: Watch };

function currentFile(): string {
  try {
    const path = expect.getState().testPath;
    return path ? relative(process.cwd(), path) : "(unknown file)";
  } catch {
    return "(unknown file)";
  }
}

function start(): Watch {
  // Taken now: a test's fake timers may replace these globals later.
  const now = performance.now.bind(performance);
  const cpuUsage = process.cpuUsage.bind(process);
  const cpuMs = () => {
    const { user, system } = cpuUsage();
    return (user + system) / 1000;
  };
  let at = now();
  let cpuAt = cpuMs();
  let since: Whereabouts = {};
  const watch: Watch = {
    where: {},
    look(where, ticked) {
      const t = now();
      const cpu = cpuMs();
      // A tick is due TICK_MS after the span began; a hook may look at any time.
      const blockedMs = t - at - (ticked ? TICK_MS : 0);
      if (blockedMs >= BLOCKED_MS) {
        process.stderr.write(blockLine({ file: currentFile(), blockedMs, cpuMs: cpu - cpuAt, before: since, after: watch.where }));
      }
      at = t;
      cpuAt = cpu;
      since = watch.where = where;
    },
  };
  setInterval(() => watch.look(watch.where, true), TICK_MS).unref();
  return watch;
}

const watch = holder[WATCH] ?? start();
holder[WATCH] = watch;
watch.look({}, false);

// Tests that block back to back run with no turn of the loop between them, so
// the timer alone would see one block across both: the hooks look too, and each
// block is charged to the test or the stretch between tests it happened in.
beforeEach(() => watch.look({ running: expect.getState().currentTestName ?? "(unnamed)" }, false));
afterEach(() => watch.look({ last: watch.where.running }, false));
