import type { Repos } from "@cm/db";
import { expect } from "vitest";
import { wholeBooks } from "./book-equations";

/**
 * The ledger's invariants over every account (book-equations.ts) hold. The
 * per-tenant ones (balance = sum of rows, holds add up) are the callers'.
 */
export async function checkWholeBooks(repos: Repos) {
  const { totals, broken } = await wholeBooks(repos);
  expect(broken, "the whole books").toEqual([]);
  return totals;
}
