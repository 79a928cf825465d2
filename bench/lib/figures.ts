// What a benchmark hands `npm run bench:check` (bench/check.ts): each figure it
// measured beside the goal the README states for it. Run by hand, a benchmark
// prints only its own lines; under bench:check (BENCH_FIGURES=1) it also prints
// one line of JSON that the check reads.

/** `at most` a figure where less is better (a time, a ratio to a baseline's time); `at least` where more is. */
export type Figure = { name: string; value: number; goal: number; better: "lower" | "higher"; unit?: string };

/** `--quick`: the short version bench:check runs, a few runs or seconds per figure. */
export const quick = process.argv.includes("--quick");

export const FIGURES_PREFIX = "@bench-figures ";

export function reportFigures(bench: string, figures: Figure[]): void {
  if (process.env.BENCH_FIGURES === "1") console.log(FIGURES_PREFIX + JSON.stringify({ bench, figures }));
}
