import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["apps/*/test/**/*.test.ts", "packages/*/test/**/*.test.ts"],
    // Real Docker and PostgreSQL sit behind many tests: give them room, and keep
    // files in separate processes so one suite's servers never leak into another.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Two cores: more workers only fight over them and make Docker timings flaky.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
