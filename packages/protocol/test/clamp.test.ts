import { describe, expect, it } from "vitest";
import { z } from "zod";
import { AgentFrame, parseFrame } from "../src/agent/wire";
import { labelText, text } from "../src/api/common";
import { clampToSchema, cutOnWholeCharacters } from "../src/clamp";
import { ExecServerControl } from "../src/exec";

// What the agent sends is clamped to the schemas the receiver parses with (habit 17). The
// property: for every frame an agent sends, whatever text from outside its strings carry,
// the clamped frame parses; a frame that already parsed comes back as it was.

const EMOJI = "😀";
/** Pieces of hostile text: emoji and sequences of them, lone surrogates, NUL, C0, C1, DEL, escapes, bidi overrides, separators, combining marks. */
const PIECES = [
  "a",
  "é",
  "中",
  EMOJI,
  "👨‍👩‍👧",
  "🇩🇪",
  "\uD83D",
  "\uDE00",
  "\0",
  "\t",
  "\n",
  "\r\n",
  "\u001b[31m",
  "\u007f",
  "\u009b",
  "\u202e",
  "\u2066",
  "\u2028",
  "\u061c",
  " ",
  "\u0301",
];

/** mulberry32: the same frames on every run, and a failure's seed reproduces it. */
function seeded(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  return { next, int, pick: <T>(items: readonly T[]) => items[int(0, items.length - 1)] as T };
}
type Random = ReturnType<typeof seeded>;

/** Text no one would choose, at most about twice the field's limit (the 64 KiB of a log line included). */
function hostileText(random: Random, maxUnits: number): string {
  switch (random.int(0, 4)) {
    case 0:
      return EMOJI.repeat(3000);
    case 1:
      // The limit falls inside a surrogate pair.
      return `a${EMOJI.repeat(Math.ceil(maxUnits / 2) + 1)}`;
    case 2:
      return "\uD83D".repeat(random.int(1, maxUnits + 10));
    case 3:
      return Array.from({ length: random.int(1, 40) }, () => random.pick(["\0", "\t", "\u001b", "\u009b", "\u202e", "\u2028", "\u007f"])).join("");
    default: {
      const target = random.int(1, Math.min(2 * maxUnits + 10, 140_000));
      let out = "";
      while (out.length < target) out += random.pick(PIECES);
      return out;
    }
  }
}

function checkBound(schema: z.core.$ZodType, check: string): number | undefined {
  const found = schema._zod.def.checks?.find((c) => c._zod.def.check === check);
  return found ? (found._zod.def as unknown as { minimum?: number; maximum?: number })[check === "min_length" ? "minimum" : "maximum"] : undefined;
}

/** A value of `schema`, right in every way but (when `hostile`) the text in its strings. */
function arbitrary(schema: z.core.$ZodType, random: Random, hostile: boolean): unknown {
  if (schema instanceof z.ZodString) {
    const max = schema.maxLength ?? 5000;
    if (hostile) return hostileText(random, max);
    return "ok "
      .repeat(max)
      .slice(0, random.int(Math.max(schema.minLength ?? 0, 1), Math.min(max, 40)))
      .replace(/ $/, "k");
  }
  if (schema instanceof z.ZodNumber) {
    const lo = Math.max(schema.minValue ?? -1e6, -1e6);
    const hi = Math.min(schema.maxValue ?? 1e6, lo + 1e6);
    return schema.isInt ? random.int(lo, hi) : lo + random.next() * (hi - lo);
  }
  if (schema instanceof z.ZodBoolean) return random.next() < 0.5;
  if (schema instanceof z.ZodLiteral) return schema.value;
  if (schema instanceof z.ZodEnum) return random.pick(schema.options);
  if (schema instanceof z.ZodObject) {
    const out: Record<string, unknown> = {};
    for (const [key, field] of Object.entries(schema.shape)) {
      if (field instanceof z.ZodOptional && random.next() < 0.2) continue;
      out[key] = arbitrary(field instanceof z.ZodOptional ? field.unwrap() : field, random, hostile);
    }
    return out;
  }
  if (schema instanceof z.ZodArray) {
    const min = checkBound(schema, "min_length") ?? 0;
    const max = checkBound(schema, "max_length") ?? min + 3;
    return Array.from({ length: random.int(min, Math.min(max, min + 3)) }, () => arbitrary(schema.element, random, hostile));
  }
  if (schema instanceof z.ZodUnion) return arbitrary(random.pick(schema.options), random, hostile);
  if (schema instanceof z.ZodNullable) return random.next() < 0.2 ? null : arbitrary(schema.unwrap(), random, hostile);
  if (schema instanceof z.ZodOptional) return arbitrary(schema.unwrap(), random, hostile);
  throw new Error(`no generator for a ${schema._zod.def.type} schema: add one, so the property still covers every frame`);
}

const SENT = [
  ["agent -> control plane", AgentFrame],
  ["agent -> exec client", ExecServerControl],
] as const;
const RUNS = 60;

describe.each(SENT)("every %s frame", (_wire, union) => {
  const options = union.options.map((option) => [option.shape.type.value, option as z.ZodType] as const);

  it.each(options)("%s: with hostile text in every string, clamped, parses", (_type, schema) => {
    for (let seed = 1; seed <= RUNS; seed++) {
      const frame = arbitrary(schema, seeded(seed), true) as z.input<typeof union>;
      const clamped = clampToSchema(union, frame);
      const parsed = parseFrame(union, JSON.stringify(clamped));
      expect(parsed.ok ? "parses" : `seed ${seed}: ${parsed.error.slice(0, 500)}`).toBe("parses");
      expect(clampToSchema(union, clamped)).toEqual(clamped);
    }
  });

  it.each(options)("%s: already acceptable, comes back as it was", (_type, schema) => {
    for (let seed = 1; seed <= RUNS; seed++) {
      const frame = arbitrary(schema, seeded(seed), false) as z.input<typeof union>;
      expect(union.safeParse(frame).success).toBe(true);
      expect(clampToSchema(union, frame)).toEqual(frame);
    }
  });
});

describe("clampToSchema", () => {
  const status = { type: "status", deploymentId: "dep_1", runSeq: 1, status: "failed", at: 0 } as const;

  it("keeps as much of a 3,000-emoji reason as 2,000 UTF-16 units hold, whole", () => {
    for (const prefix of ["", "x"]) {
      const reason = `${prefix}${EMOJI.repeat(3000)}`;
      const clamped = clampToSchema(AgentFrame, { ...status, reason }) as typeof status & { reason: string };
      expect(reason.startsWith(clamped.reason)).toBe(true);
      expect(clamped.reason.length).toBe(prefix.length === 0 ? 2000 : 1999);
      expect(clamped.reason.endsWith(EMOJI)).toBe(true);
      expect(parseFrame(AgentFrame, JSON.stringify(clamped)).ok).toBe(true);
    }
  });

  it("replaces lone surrogates, and NUL where the field refuses it, with U+FFFD; keeps the lines of a reason", () => {
    const reason = "pull failed:\n\tbad \uD83D token\0 \uDE00";
    expect(clampToSchema(AgentFrame, { ...status, reason })).toEqual({ ...status, reason: "pull failed:\n\tbad \uFFFD token\uFFFD \uFFFD" });
  });

  it("makes each run of control characters one space in a field that refuses them, and only there", () => {
    const schema = z.object({ label: labelText(64), reason: text().max(64), plain: z.string().max(64) });
    const hostile = "NVIDIA\t\u001b[0m H100\u202e ";
    expect(clampToSchema(schema, { label: hostile, reason: hostile, plain: hostile })).toEqual({ label: "NVIDIA [0m H100", reason: hostile, plain: hostile });
  });

  it("walks records, nullable and optional fields, plain unions, tuples and lazy schemas", () => {
    type Tree = { name: string; children: Tree[] };
    const Tree: z.ZodType<Tree> = z.lazy(() => z.object({ name: z.string().max(2), children: z.array(Tree) }));
    const schema = z.object({
      env: z.record(z.string(), z.string().max(2)),
      maybe: z.string().max(2).nullable().optional(),
      either: z.union([z.number(), z.string().max(2)]),
      pair: z.tuple([z.string().max(2), z.number()]),
      tree: Tree,
    });
    const value = {
      env: { LONG: "abc" },
      maybe: "abc",
      either: "abc",
      pair: ["abc", 1] as [string, number],
      tree: { name: "abc", children: [{ name: "a😀", children: [] }] },
    };
    expect(clampToSchema(schema, value)).toEqual({
      env: { LONG: "ab" },
      maybe: "ab",
      either: "ab",
      pair: ["ab", 1],
      tree: { name: "ab", children: [{ name: "a", children: [] }] },
    });
    expect(clampToSchema(schema, { ...value, maybe: null }).maybe).toBeNull();
  });
});

describe("cutOnWholeCharacters", () => {
  it("cuts at the limit, or one unit before it where the limit falls inside a surrogate pair", () => {
    expect(cutOnWholeCharacters("abc", 5)).toBe("abc");
    expect(cutOnWholeCharacters("abc", 2)).toBe("ab");
    expect(cutOnWholeCharacters(`a${EMOJI}`, 2)).toBe("a");
    expect(cutOnWholeCharacters(`a${EMOJI}`, 3)).toBe(`a${EMOJI}`);
    expect(cutOnWholeCharacters(EMOJI, 1)).toBe("");
    expect(cutOnWholeCharacters("abc", 0)).toBe("");
  });
});
