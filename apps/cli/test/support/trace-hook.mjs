import { appendFileSync } from "node:fs";

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (process.env.CM_TRACE_FILE) appendFileSync(process.env.CM_TRACE_FILE, `${resolved.url}\n`);
  return resolved;
}
