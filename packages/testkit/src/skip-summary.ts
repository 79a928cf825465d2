// A reporter that closes the run with one short paragraph: how many tests were
// skipped for want of what, and the command that runs them all. Vitest's own
// reporter only counts skips; a newcomer needs to know whether a skip is theirs
// to fix.
import type { Reporter, TestCase, TestModule, TestSuite } from "vitest/node";
import { SKIPPED_FOR } from "./pieces";

/** What the test, or the nearest suite around it, was skipped for (needs.ts writes it). */
function reasonsOf(test: TestCase): string[] {
  let node: TestCase | TestSuite | TestModule = test;
  for (;;) {
    const reasons = (node.meta() as Record<string, unknown>)[SKIPPED_FOR];
    if (Array.isArray(reasons)) return reasons as string[];
    if (node.type === "module") return [];
    node = node.parent;
  }
}

const tests = (n: number) => `${n} ${n === 1 ? "test" : "tests"}`;

/**
 * Pure: the summary for the reasons each skipped test had (one list per test;
 * a test may lack several pieces, and counts under each). No lines when no test
 * was skipped for a missing piece.
 */
export function skipSummaryLines(skipped: string[][]): string[] {
  const wanting = skipped.filter((reasons) => reasons.length > 0);
  if (wanting.length === 0) return [];
  const counts = new Map<string, number>();
  for (const reasons of wanting) for (const reason of reasons) counts.set(reason, (counts.get(reason) ?? 0) + 1);
  const width = String(Math.max(...counts.values())).length;
  return [
    `${tests(wanting.length)} skipped for want of what this machine lacks:`,
    ...[...counts].sort((a, b) => b[1] - a[1]).map(([reason, n]) => `  ${String(n).padStart(width)}  ${reason}`),
    "Run them all: install and start what is missing, or run `bash .ci/run` as root: it installs Docker, PostgreSQL 15, busybox, nginx, openssl, qemu-user-static, g++-aarch64-linux-gnu, docker-registry, apache2-utils and openssh-client, starts them, and runs npm test with CI=true.",
  ];
}

export default class SkipSummary implements Reporter {
  async onTestRunEnd(testModules: ReadonlyArray<TestModule>): Promise<void> {
    const skipped: string[][] = [];
    for (const module of testModules) {
      for (const test of module.children.allTests()) if (test.result().state === "skipped") skipped.push(reasonsOf(test));
    }
    const lines = skipSummaryLines(skipped);
    // Vitest calls onTestRunEnd and the default reporter's onFinished (which prints
    // its totals) in the same tick; waiting one turn puts these lines last, where
    // a reader of the run looks.
    await new Promise((resolve) => setImmediate(resolve));
    if (lines.length) process.stdout.write(`\n${lines.join("\n")}\n`);
  }
}
