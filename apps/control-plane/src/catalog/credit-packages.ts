import type { CreditPackageRow } from "@cm/db";

/** Credit packages, seeded at every start. 1 credit = 1 US cent; paid 1:1 in USDC. */
export const CREDIT_PACKAGE_SEED: CreditPackageRow[] = [
  { id: "pkg_starter", name: "Starter", credits: 1_000, bonusPercent: 0, priceUsdCents: 1_000, sortOrder: 0 },
  { id: "pkg_builder", name: "Builder", credits: 5_000, bonusPercent: 5, priceUsdCents: 5_000, sortOrder: 1 },
  { id: "pkg_pro", name: "Pro", credits: 10_000, bonusPercent: 10, priceUsdCents: 10_000, sortOrder: 2 },
  { id: "pkg_scale", name: "Scale", credits: 50_000, bonusPercent: 15, priceUsdCents: 50_000, sortOrder: 3 },
];

/** Credits plus the bonus, rounded down to whole credits. */
export const creditsToReceive = (p: Pick<CreditPackageRow, "credits" | "bonusPercent">) => p.credits + Math.floor((p.credits * p.bonusPercent) / 100);
