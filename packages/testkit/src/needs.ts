// How a test says what it needs from the machine. Outside CI a test whose piece
// is missing is skipped, and the reason travels in the task's meta to the
// closing summary (skip-summary.ts); with CI=true it runs and fails, saying what
// is missing, because CI must run everything.
import { beforeAll, describe, inject, it } from "vitest";
import { getCurrentSuite } from "vitest/suite";
import type { MissingPieces, Piece } from "./pieces";
import { SKIPPED_FOR } from "./pieces";

export type { Piece } from "./pieces";

declare module "vitest" {
  export interface ProvidedContext {
    missingPieces: MissingPieces;
  }
}

type Body = () => void | Promise<void>;

export interface Needs {
  /** why the run cannot do it, or undefined when every piece is there */
  readonly missing: string | undefined;
  describe(name: string, factory: () => void): void;
  it(name: string, body: Body, timeoutMs?: number): void;
}

function missingReasons(pieces: Piece[]): string[] {
  // Without the global setup (a file run under another config) nothing is known missing.
  const missing = inject("missingPieces") ?? {};
  return pieces.flatMap((piece) => (missing[piece] ? [missing[piece]] : []));
}

const failInCi = (reason: string) => new Error(`CI=true and a piece these tests need is missing: ${reason}`);

export function needs(...pieces: Piece[]): Needs {
  const reasons = missingReasons(pieces);
  const missing = reasons.length ? reasons.join("; ") : undefined;
  const ci = process.env.CI === "true";
  return {
    missing,
    describe(name, factory) {
      if (!missing) return void describe(name, factory);
      if (ci) {
        return void describe(name, () => {
          beforeAll(() => {
            throw failInCi(missing);
          });
          factory();
        });
      }
      describe(name, { skip: true }, () => {
        const suite = getCurrentSuite().suite;
        if (suite) (suite.meta as Record<string, unknown>)[SKIPPED_FOR] = reasons;
        factory();
      });
    },
    it(name, body, timeoutMs) {
      if (!missing) return void it(name, body, timeoutMs);
      if (ci) {
        return void it(name, () => {
          throw failInCi(missing);
        });
      }
      // `meta` is a task option the runner honours though TestOptions does not declare it.
      it(name, { skip: true, meta: { [SKIPPED_FOR]: reasons } } as Parameters<typeof it>[1] & object, body);
    },
  };
}
