// No zod here: `cm` imports this file alone (`@cm/protocol/control-characters`) so that
// printing a table does not load the schemas.

/**
 * Characters a terminal acts on instead of showing: C0 (tab and newline included;
 * ESC starts every escape sequence), DEL, C1 (U+009B is a one-character CSI, U+009D
 * an OSC), the line and paragraph separators, and the bidirectional marks, embeddings,
 * overrides and isolates, which reorder the text shown after them (CVE-2021-42574).
 * Names an operator sets (a node's name, what its agent reports of its hardware) are
 * refused with them, and `cm` shows each one escaped.
 */
export const CONTROL_CHARACTERS = "\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069";

const ANY_CONTROL = new RegExp(`[${CONTROL_CHARACTERS}]`);
const EVERY_CONTROL = new RegExp(`[${CONTROL_CHARACTERS}]`, "g");

export const hasControlCharacter = (value: string) => ANY_CONTROL.test(value);

const CONTROL_RUNS = new RegExp(`[${CONTROL_CHARACTERS}]+`, "g");
/** Each run of control characters as one space, trimmed: what an agent reports of its hardware, made acceptable. */
export const withoutControlCharacters = (value: string) => value.replace(CONTROL_RUNS, " ").trim();

/** `\x1b`, `\x9b`, `\u202e`: each control character as the JavaScript escape that names it; everything else as it is. */
export const escapeControlCharacters = (value: string) =>
  value.replace(EVERY_CONTROL, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
