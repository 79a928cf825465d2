// Tests run their child processes with runProgram so a slow one never holds the
// worker's event loop (vitest fails the run after 60 s of that, loop-watch.ts).
import { describe, expect, it } from "vitest";
import { runProgram } from "../src/run-program";

describe("runProgram", () => {
  it("resolves to the program's stdout, with its input on stdin", async () => {
    expect(await runProgram("sh", ["-c", 'read line; echo "got $line"'], { input: "hello\n" })).toBe("got hello\n");
  });

  it("closes stdin when given no input, as execFileSync does, so a program that reads it ends", async () => {
    expect(await runProgram("cat")).toBe("");
  });

  it("rejects with the program's stderr when it exits other than 0", async () => {
    await expect(runProgram("sh", ["-c", "echo no such image >&2; exit 3"])).rejects.toThrow(/no such image/);
  });

  it("kills a program that outlives its limit, saying so", async () => {
    await expect(runProgram("sleep", ["30"], { timeoutMs: 200 })).rejects.toThrow("sleep 30 did not finish within 200 ms");
  });

  it("leaves the event loop free while the program runs", async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 20);
    await runProgram("sleep", ["0.3"]);
    clearInterval(timer);
    expect(ticks).toBeGreaterThan(5);
  });
});
