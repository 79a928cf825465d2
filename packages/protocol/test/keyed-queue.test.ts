import { describe, expect, it } from "vitest";
import { KeyedQueue } from "../src/keyed-queue";

/** A task that records its start and end and settles when the test says so. */
function gate(events: string[], name: string) {
  let open!: () => void;
  let fail!: (err: Error) => void;
  const done = new Promise<string>((resolve, reject) => {
    open = () => resolve(name);
    fail = reject;
  });
  const task = async () => {
    events.push(`start ${name}`);
    try {
      return await done;
    } finally {
      events.push(`end ${name}`);
    }
  };
  return { task, open, fail };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe("KeyedQueue", () => {
  it("runs a key's tasks one after another, in the order they came", async () => {
    const queue = new KeyedQueue();
    const events: string[] = [];
    const [a1, a2, a3] = ["a1", "a2", "a3"].map((n) => gate(events, n));
    const results = [queue.run("a", a1!.task), queue.run("a", a2!.task), queue.run("a", a3!.task)];
    await turn();
    expect(events).toEqual(["start a1"]);
    a2!.open();
    a3!.open();
    a1!.open();
    expect(await Promise.all(results)).toEqual(["a1", "a2", "a3"]);
    expect(events).toEqual(["start a1", "end a1", "start a2", "end a2", "start a3", "end a3"]);
  });

  it("runs different keys side by side", async () => {
    const queue = new KeyedQueue();
    const events: string[] = [];
    const a = gate(events, "a");
    const b = gate(events, "b");
    const ran = [queue.run("a", a.task), queue.run("b", b.task)];
    await turn();
    expect(events).toEqual(["start a", "start b"]);
    b.open();
    expect(await ran[1]).toBe("b");
    a.open();
    await ran[0];
  });

  it("rejects only the failing task's caller; the next task still runs", async () => {
    const queue = new KeyedQueue();
    const events: string[] = [];
    const first = gate(events, "first");
    const failed = queue.run("a", first.task);
    const thrown = queue.run("a", () => {
      throw new Error("thrown synchronously");
    });
    const next = queue.run("a", () => "next");
    first.fail(new Error("first failed"));
    await expect(failed).rejects.toThrow("first failed");
    await expect(thrown).rejects.toThrow("thrown synchronously");
    expect(await next).toBe("next");
  });

  it("forgets a key once its queue is empty", async () => {
    const queue = new KeyedQueue();
    const events: string[] = [];
    const a = gate(events, "a");
    const ran = queue.run("a", a.task);
    void queue.run("b", () => Promise.reject(new Error("no"))).catch(() => {});
    expect(queue.size).toBe(2);
    await turn();
    expect(queue.size).toBe(1);
    a.open();
    await ran;
    await turn();
    expect(queue.size).toBe(0);
  });

  it("idle() waits for every task, those queued while it waits included", async () => {
    const queue = new KeyedQueue();
    const events: string[] = [];
    const a = gate(events, "a");
    const late = gate(events, "late");
    void queue.run("a", async () => {
      await a.task();
      void queue.run("b", late.task);
    });
    let idle = false;
    const waiting = queue.idle().then(() => (idle = true));
    a.open();
    await turn();
    expect(events).toEqual(["start a", "end a", "start late"]);
    expect(idle).toBe(false);
    late.open();
    await waiting;
    expect(queue.size).toBe(0);
  });
});
