// Mends a crash in postgres.js 3.4.x (porsager/postgres#1154, #1208; fixes proposed
// upstream in #1168 and #1209, none released as of 3.4.9), run after every install.
//
// Small writes wait for a setImmediate (nextWrite); when the connection closes
// (the database restarts, a network blip) `socket` becomes null, and a write
// scheduled after that throws from the immediate: an uncaught TypeError that
// takes the whole control plane down, with nothing our code can catch. Our
// database-outage fault test saw it. The teardown paths also cancel the
// immediate without forgetting it, so a reconnected connection could never flush
// a small write again.
//
// The mend, in each build of connection.js (ESM, CommonJS, Cloudflare): a write
// with no socket fails its queries with CONNECTION_CLOSED (which our database
// layer already turns into 503 and a retry) instead of throwing; teardown forgets
// the cancelled write. Idempotent; a build that no longer has the code (upstream
// fixed it) is left alone with a note.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

export const MARK = "/* cm: nextWrite guarded (scripts/patch-postgres.mjs) */";

const NEXT_WRITE = "  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)";
const GUARDED_NEXT_WRITE = `  function nextWrite(fn) {
    ${MARK}
    if (!socket) {
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }
    const x = socket.write(chunk, fn)`;
const TEARDOWN = "    clearImmediate(nextWriteTimer)\n";
const GUARDED_TEARDOWN = "    clearImmediate(nextWriteTimer)\n    nextWriteTimer = chunk = null\n";

/** The connection.js text with the mend, or undefined when it does not have the code this mends. */
export function mend(source) {
  if (source.includes(MARK)) return source;
  if (!source.includes(NEXT_WRITE) || source.split(TEARDOWN).length !== 3) return undefined;
  return source.replace(NEXT_WRITE, GUARDED_NEXT_WRITE).replaceAll(TEARDOWN, GUARDED_TEARDOWN);
}

/** Every build of connection.js in the installed postgres package (found as Node finds it, from `from` up). */
export function connectionFiles(from = process.cwd()) {
  for (let dir = from; ; dir = dirname(dir)) {
    const root = join(dir, "node_modules", "postgres");
    if (existsSync(join(root, "package.json"))) return ["src", "cjs/src", "cf/src"].map((d) => join(root, d, "connection.js")).filter((f) => existsSync(f));
    if (dirname(dir) === dir) return [];
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const file of connectionFiles()) {
    const source = readFileSync(file, "utf8");
    const mended = mend(source);
    if (mended === undefined) console.warn(`patch-postgres: ${file} does not have the code this mends (fixed upstream?): left as it is`);
    else if (mended !== source) writeFileSync(file, mended);
  }
}
