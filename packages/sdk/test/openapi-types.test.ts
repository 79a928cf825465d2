import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { SDK_TYPES, sdkTypes, servedDocument } from "../../../scripts/sdk-types";

// The SDK's calls are typed from src/openapi.ts (routes.ts): it must be what the control
// plane serves today, or a changed route would still typecheck against the old one.

it("src/openapi.ts is what `npm run sdk:types` makes of the document the control plane serves", async () => {
  const served = (await sdkTypes(await servedDocument())).split("\n");
  const kept = readFileSync(SDK_TYPES, "utf8").split("\n");
  const at = served.findIndex((line, i) => line !== kept[i]);
  const first = at === -1 && served.length === kept.length ? undefined : { line: at + 1, kept: kept[at], served: served[at] };
  expect(first, "packages/sdk/src/openapi.ts differs from the served document: run npm run sdk:types, then fix what no longer typechecks").toBeUndefined();
});
