import type { Repos } from "@cm/db";
import { wholeBooks } from "./book-equations";

/**
 * The ledger's invariants over every account (book-equations.ts) hold. The
 * per-tenant ones (balance = sum of rows, holds add up) are the callers'.
 */
export async function checkWholeBooks(repos: Repos) {
  const { totals, broken } = await wholeBooks(repos);
  // Thrown as the equations' own words (a matcher's diff would cut them short), so a test can name the one it expects broken.
  if (broken.length > 0) throw new Error(`the whole books: ${broken.join("; ")}`);
  return totals;
}
