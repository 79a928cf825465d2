// A module hook (node --import ./trace-imports.mjs): every module URL resolved in
// the process is appended to $CM_TRACE_FILE, so a test can say what a command loaded.
import { register } from "node:module";

register(new URL("./trace-hook.mjs", import.meta.url));
