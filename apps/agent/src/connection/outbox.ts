// Frames that must survive a disconnection (status reports). Logs are not kept
// here: they are re-read from Docker from the control plane's acknowledged cursor.
import type { AgentFrame } from "@cm/protocol";

export class Outbox {
  private frames: AgentFrame[] = [];
  private droppedCount = 0;

  constructor(private readonly maxFrames: number) {}

  push(frame: AgentFrame): void {
    this.frames.push(frame);
    // The newest reports say the most; a node offline for long re-reports on the next sync anyway.
    if (this.frames.length > this.maxFrames) {
      this.frames.shift();
      this.droppedCount += 1;
    }
  }

  /** Empties the queue, returning what was in it and how many older frames were dropped. */
  drain(): { frames: AgentFrame[]; dropped: number } {
    const drained = { frames: this.frames, dropped: this.droppedCount };
    this.frames = [];
    this.droppedCount = 0;
    return drained;
  }

  get size(): number {
    return this.frames.length;
  }
}
