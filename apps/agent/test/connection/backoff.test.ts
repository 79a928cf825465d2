import { RETRYABLE_CLOSE } from "@cm/protocol";
import { describe, expect, it } from "vitest";
import { backoffCeilingMs, backoffDelayMs } from "../../src/connection/backoff";
import { explainFatalClose } from "../../src/connection/close-codes";

const policy = { initialMs: 250, maxMs: 30_000 };

describe("backoff", () => {
  it("doubles from the initial delay up to the cap", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7, 8, 50].map((attempt) => backoffCeilingMs(attempt, policy))).toEqual([
      250, 500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000,
    ]);
  });

  it("draws the delay uniformly below the ceiling (full jitter)", () => {
    expect(backoffDelayMs(3, policy, () => 0)).toBe(0);
    expect(backoffDelayMs(3, policy, () => 0.5)).toBe(1000);
    expect(backoffDelayMs(3, policy, () => 0.999_999)).toBe(2000);
    expect(backoffDelayMs(40, policy, () => 0.5)).toBe(15_000);
  });
});

describe("close codes", () => {
  it("retries after everything but the fix-your-setup codes", () => {
    expect([1000, 1001, 1006, 1011, 1012, 4400, 4408].every(RETRYABLE_CLOSE)).toBe(true);
    expect([4401, 4406, 4409, 4410].some(RETRYABLE_CLOSE)).toBe(false);
  });

  it("tells the operator what to do", () => {
    expect(explainFatalClose(4401, "unknown token")).toContain("Check AGENT_TOKEN");
    expect(explainFatalClose(4401, "unknown token")).toContain("(the control plane said: unknown token)");
    expect(explainFatalClose(4409, "")).toContain("only one machine uses this token");
    expect(explainFatalClose(4406, "")).toContain("Upgrade the agent");
    expect(explainFatalClose(4410, "node node_1 was retired")).toContain("the operator retired this node");
  });
});
