import { microToCredits, type Repos } from "@cm/db";
import { ApiError } from "../errors";

/**
 * 402 INSUFFICIENT_CREDITS with what a tenant needs to act on it: the hour's hold
 * the deployment needs (its hourly rate, 1 credit = 1 cent), what is available now,
 * and where more comes from. Read after the refusal, outside its transaction: the
 * balance may have moved since, and it is only advice.
 */
export async function insufficientCredits(repos: Repos, userId: string, hourlyRateCents: number): Promise<ApiError> {
  const availableCredits = microToCredits((await repos.ledger.balance(userId)).availableMicro);
  return new ApiError(
    "INSUFFICIENT_CREDITS",
    `this deployment holds one hour of its rate, ${hourlyRateCents} credits, while it runs, and ${availableCredits} credits are available: add credits with \`cm credits buy PACKAGE_ID\` (\`cm credits packages\` lists them) or POST /credits/deposit/initiate`,
    { requiredCredits: hourlyRateCents, availableCredits },
  );
}
