// The in-memory sandbox engine keeps the contract DockerSandboxEngine keeps on
// real Docker (docker-sandbox-engine.test.ts), so what the pool's tests learn on
// it holds on an engine.
import { describe } from "vitest";
import { MemorySandboxEngine } from "../support/memory-sandbox-engine";
import { sandboxEngineContract } from "../support/sandbox-engine-contract";

describe("MemorySandboxEngine keeps the sandbox engine contract", () => {
  sandboxEngineContract(() => {
    const engine = new MemorySandboxEngine();
    return {
      engine,
      labels: { "cm.test": "sandbox-contract" },
      async join(sandbox) {
        engine.containers.set(`dep-${sandbox}`, { name: `dep-${sandbox}`, labels: { "cm.sandbox-name": sandbox }, createdMs: Date.now(), state: "created" });
      },
      async stopOutOfBand(name) {
        engine.containers.get(name)!.state = "exited";
      },
      async removeOutOfBand(name) {
        engine.containers.delete(name);
      },
    };
  });
});
