/**
 * Runs tasks one after another per key, and different keys side by side: a
 * stop that arrives while its deployment starts waits for the start instead of
 * racing it. A task that fails fails only its own caller; the next one still
 * runs. A key is forgotten once nothing is queued under it, so keys that come
 * and go (nodes, deployments) do not grow the map.
 */
export class KeyedQueue<K = string> {
  private readonly tails = new Map<K, Promise<void>>();

  run<T>(key: K, task: () => T | Promise<T>): Promise<T> {
    const next = (this.tails.get(key) ?? Promise.resolve()).then(task);
    const tail = next.then(noop, noop);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }

  /** Keys with a task queued or running. */
  get size(): number {
    return this.tails.size;
  }

  /** Settles once every task has settled, those queued while waiting included. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all(this.tails.values());
  }
}

function noop() {}
