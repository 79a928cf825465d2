import { version as cmVersion } from "../../package.json";
import type { Run } from "../args";

export const version: Run = async (ctx) => {
  if (ctx.json) return ctx.out.json({ version: cmVersion });
  ctx.out.line(cmVersion);
};
