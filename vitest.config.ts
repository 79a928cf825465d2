import { defineConfig } from "vitest/config";

/**
 * Tests that put rules on this machine's real firewall, run after every other
 * file and alone: an agent another test runs as root installs its own egress
 * policy meanwhile, and a run where the two overlapped saw traffic the test's
 * policy refuses pass (reproduced: firewall.test.ts beside e2e/system.test.ts).
 */
const ALONE = ["apps/agent/test/egress/firewall.test.ts"];

export default defineConfig({
  test: {
    projects: [
      { extends: true, test: { name: "tests", include: ["apps/*/test/**/*.test.ts", "packages/*/test/**/*.test.ts"], exclude: ALONE } },
      { extends: true, test: { name: "the real firewall, alone", include: ALONE, sequence: { groupOrder: 1 } } },
    ],
    // Probes Docker, PostgreSQL and the tools some tests need, once per run;
    // tests that lack one skip with its reason (fail under CI=true), and the
    // skip summary closes the run with what was skipped and why.
    globalSetup: ["./packages/testkit/src/global-setup.ts"],
    // Names, on stderr, a test that holds its worker's event loop 10 s or more:
    // at 60 s vitest fails the whole run ("Timeout calling onTaskUpdate") without
    // saying which file. Tests run their child processes with testkit's runProgram.
    setupFiles: ["./packages/testkit/src/loop-watch.ts"],
    reporters: ["default", "./packages/testkit/src/skip-summary.ts"],
    // The tests build real token transfers with @solana/spl-token, which loads
    // bigint-buffer; its native addon is deliberately not built (no compiler on a
    // newcomer's machine, and the pure JS path is what it falls back to), so its
    // "Failed to load bindings" warning is noise nobody can act on. The product
    // itself does not load it (see to-transfer-facts.ts).
    onConsoleLog: (log) => !log.startsWith("bigint: Failed to load bindings"),
    // Real Docker and PostgreSQL sit behind many tests: give them room, and keep
    // files in separate processes so one suite's servers never leak into another.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Two cores: more workers only fight over them and make Docker timings flaky.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
