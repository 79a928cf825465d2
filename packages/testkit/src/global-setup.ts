// Runs once per `vitest run`, in the main process: probes the machine and hands
// the answer to every test file (needs.ts reads it with inject()).
import type { TestProject } from "vitest/node";
import { probePieces } from "./pieces";

export default async function setup(project: TestProject): Promise<void> {
  project.provide("missingPieces", await probePieces());
}
