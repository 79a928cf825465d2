import fc from "fast-check";
import { deref, type OpenApiDocument, type Schema, typesOf, type Validator } from "./document";

/*
 * fast-check arbitraries read from the document's JSON schemas, for the subset
 * it uses: object (required, properties, additionalProperties, propertyNames,
 * maxProperties), string (min/maxLength, pattern, enum, format date-time),
 * integer and number (minimum, maximum), boolean, array (items, min/maxItems),
 * type lists and nullable, anyOf, oneOf, $ref. Valid values come from the
 * schema; invalid ones are valid values with one thing broken. Whether a value
 * is valid is decided afterwards by the validator, never assumed here.
 */

/** Strings no column can hold, and text a naive parser mishandles. */
export const NASTY_STRINGS = [
  "\u0000",
  "a\u0000b",
  "\uD800",
  "x\uDFFFy",
  "\uDBFF\uDFFF",
  "🚀".repeat(3),
  "' OR 1=1 --",
  "%00",
  "../../etc/passwd",
  "\u202Eevil",
  " ",
  "null",
];
/** Sent rarely: each costs the server a megabyte of parsing. */
export const HUGE_STRINGS = [(n: number) => "a".repeat(n)];
const MIB = 1024 * 1024;

export const BOUNDARY_NUMBERS = [0, -1, 1, 1.5, -0.5, 2 ** 31 - 1, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 - 1, 2 ** 53 + 2, 1e308, -1e308, Number.MIN_VALUE];

export type Fixtures = Record<string, string[]>;

export function valueArbitrary(doc: OpenApiDocument, schemaIn: Schema | undefined, fixtures: Fixtures = {}, field = "", depth = 0): fc.Arbitrary<unknown> {
  const schema = deref(doc, schemaIn);
  const known = fixtures[field];
  const base = schemaArbitrary(doc, schema, fixtures, depth);
  return known?.length ? fc.oneof({ arbitrary: fc.constantFrom(...known), weight: 3 }, { arbitrary: base, weight: 1 }) : base;
}

function schemaArbitrary(doc: OpenApiDocument, schema: Schema, fixtures: Fixtures, depth: number): fc.Arbitrary<unknown> {
  const variants = schema.anyOf ?? schema.oneOf;
  if (variants) return fc.oneof(...variants.map((v) => valueArbitrary(doc, v, fixtures, "", depth + 1)));
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if ("const" in schema) return fc.constant(schema.const);
  const types = typesOf(schema);
  if (types.length === 0) return fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean(), fc.constant(null));
  return fc.oneof(...types.map((t) => typedArbitrary(doc, schema, t, fixtures, depth)));
}

function typedArbitrary(doc: OpenApiDocument, schema: Schema, type: string, fixtures: Fixtures, depth: number): fc.Arbitrary<unknown> {
  switch (type) {
    case "null":
      return fc.constant(null);
    case "boolean":
      return fc.boolean();
    case "integer":
      return integerArbitrary(schema.minimum, schema.maximum);
    case "number":
      return fc.oneof(
        integerArbitrary(schema.minimum, schema.maximum),
        fc.double({ min: schema.minimum ?? -1e9, max: schema.maximum ?? 1e9, noNaN: true, noDefaultInfinity: true }).map((n) => (Object.is(n, -0) ? 0 : n)),
      );
    case "string":
      return stringArbitrary(schema);
    case "array": {
      const maxLength = Math.min(schema.maxItems ?? 3, 4);
      return fc.array(valueArbitrary(doc, schema.items, fixtures, "", depth + 1), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.max(maxLength, schema.minItems ?? 0),
      });
    }
    case "object":
      return objectArbitrary(doc, schema, fixtures, depth);
    default:
      throw new Error(`type ${type} is outside the subset the fuzzer reads`);
  }
}

function integerArbitrary(minimum = Number.MIN_SAFE_INTEGER, maximum = Number.MAX_SAFE_INTEGER): fc.Arbitrary<number> {
  const lo = Math.ceil(minimum);
  const hi = Math.floor(maximum);
  // The edges are where columns overflow: tried often.
  return fc.oneof(
    { arbitrary: fc.bigInt(BigInt(lo), BigInt(hi)).map(Number), weight: 3 },
    { arbitrary: fc.constantFrom(lo, hi), weight: 1 },
    { arbitrary: fc.integer({ min: Math.max(lo, 0), max: Math.min(hi, Math.max(lo, 0) + 100) }), weight: 2 },
  );
}

function stringArbitrary(schema: Schema): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0;
  const maxLength = schema.maxLength ?? Number.POSITIVE_INFINITY;
  const fits = (s: string) => [...s].length >= minLength && [...s].length <= maxLength;
  if (schema.format === "date-time") {
    return fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true }).map((d) => d.toISOString());
  }
  if (schema.pattern) {
    // ajv reads patterns with the u flag; so does this.
    const re = new RegExp(schema.pattern, "u");
    try {
      return fc.stringMatching(re).filter((s) => fits(s) && re.test(s));
    } catch {
      // fast-check cannot build some patterns (lookahead): draw text and keep what matches.
      const draw = { minLength, maxLength: Math.min(maxLength, Math.max(minLength, 24)) };
      return fc.oneof(fc.string(draw), fc.string({ ...draw, unit: "grapheme" })).filter((s) => fits(s) && re.test(s));
    }
  }
  const bounded = { minLength, maxLength: Math.min(maxLength, Math.max(minLength, 24)) };
  return fc.oneof(
    { arbitrary: fc.string(bounded), weight: 4 },
    { arbitrary: fc.string({ ...bounded, unit: "grapheme" }).filter(fits), weight: 1 },
    ...(Number.isFinite(maxLength) && maxLength <= 100_000 ? [{ arbitrary: fc.constant("a".repeat(maxLength)), weight: 1 }] : []),
  );
}

function objectArbitrary(doc: OpenApiDocument, schema: Schema, fixtures: Fixtures, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const props = schema.properties ?? {};
  const record = fc.record(Object.fromEntries(Object.entries(props).map(([name, s]) => [name, valueArbitrary(doc, s, fixtures, name, depth + 1)])), {
    requiredKeys: schema.required ?? [],
  });
  const extra = schema.additionalProperties;
  if (extra === undefined || extra === false || extra === true || Object.keys(props).length > 0) return record as fc.Arbitrary<Record<string, unknown>>;
  // A map (additionalProperties with a schema): keys from propertyNames when the document gives them.
  const names = deref(doc, schema.propertyNames as Schema | undefined);
  const key = names.pattern || names.maxLength ? stringArbitrary(names) : fc.string({ minLength: 1, maxLength: 12 });
  return fc.dictionary(key, valueArbitrary(doc, extra, fixtures, "", depth + 1), { maxKeys: Math.min(schema.maxProperties ?? 4, 4) });
}

/** A value of the wrong JSON type for the schema (or a boundary number, or nasty text). */
export function wrongValueArbitrary(doc: OpenApiDocument, schemaIn: Schema | undefined): fc.Arbitrary<unknown> {
  const schema = deref(doc, schemaIn);
  const types = typesOf(schema);
  const choices: Array<fc.Arbitrary<unknown>> = [fc.constantFrom(null, true, 12345, "text", [], {}, [1, "a"], { nested: { deep: [] } })];
  if (types.includes("integer") || types.includes("number")) {
    const edges = [schema.minimum, schema.maximum].filter((n): n is number => n !== undefined).flatMap((n) => [n - 1, n + 1, n + 0.5]);
    choices.push(fc.constantFrom(...BOUNDARY_NUMBERS, ...edges), fc.constantFrom("1", "0x10", "NaN"));
  }
  if (types.includes("string") || types.length === 0) {
    const len = schema.maxLength;
    choices.push(
      fc.constantFrom(
        ...NASTY_STRINGS,
        ...(len !== undefined && len < 100_000 ? ["b".repeat(len + 1)] : []),
        ...(schema.minLength ? ["".padEnd(schema.minLength - 1, "c")] : []),
      ),
    );
  }
  return fc.oneof(...choices);
}

/** A valid object of the schema with one thing broken: a field dropped, retyped, or one too many. */
export function brokenObjectArbitrary(doc: OpenApiDocument, schemaIn: Schema | undefined, fixtures: Fixtures): fc.Arbitrary<unknown> {
  const schema = deref(doc, schemaIn);
  const valid = valueArbitrary(doc, schema, fixtures);
  const props = Object.keys(schema.properties ?? {});
  const breakers: Array<fc.Arbitrary<unknown>> = [fc.constantFrom(null, [], "body", 42, true)];
  if (props.length > 0) {
    breakers.push(
      fc
        .tuple(valid, fc.constantFrom(...props))
        .chain(([obj, name]) => wrongValueArbitrary(doc, schema.properties![name]).map((bad) => ({ ...(obj as object), [name]: bad }))),
      fc.tuple(valid, fc.constantFrom(...props)).map(([obj, name]) => {
        const copy = { ...(obj as Record<string, unknown>) };
        delete copy[name];
        return copy;
      }),
      valid.map((obj) => ({ ...(obj as object), unexpectedField: "x" })),
      // Rarely: a megabyte in one field (just under and just over the 1 MiB body limit).
      fc
        .tuple(valid, fc.constantFrom(...props), fc.constantFrom(MIB, MIB - 512))
        .map(([obj, name, n]) => ({ ...(obj as object), [name]: HUGE_STRINGS[0]!(n) })),
    );
  }
  return fc.oneof(...breakers.map((arbitrary, i) => ({ arbitrary, weight: i === 4 ? 1 : 3 })));
}

/** How a query string carries a value of the schema. */
export function queryText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** Query values a parser might read too kindly. */
export function oddQueryValues(doc: OpenApiDocument, schemaIn: Schema): string[] {
  const schema = deref(doc, schemaIn);
  const types = typesOf(schema);
  const out = ["", " ", "\u0000", "abc", "%", "[]", "null", "undefined"];
  if (types.includes("integer") || types.includes("number")) {
    out.push(
      "0x10",
      "1e3",
      "+1",
      " 1",
      "1 ",
      "1.0",
      "1.5",
      "-1",
      "-0",
      "01",
      "Infinity",
      "NaN",
      "9007199254740993",
      "99999999999999999999",
      "2147483648",
      "-2147483649",
    );
  }
  if (types.includes("boolean")) out.push("TRUE", "yes", "no", "on", "2");
  if (types.includes("string")) {
    out.push("NOT_IN_ENUM", "\uD83D\uDE80", "x".repeat((schema.maxLength ?? 200) + 1));
    if (schema.format === "date-time") out.push("2026-13-01T00:00:00Z", "yesterday", "2026-11-01");
  }
  return out;
}

/** The edges of a query parameter's bounds, each side, where clamping and overflow hide. */
export function boundaryQueryValues(doc: OpenApiDocument, schemaIn: Schema): string[] {
  const schema = deref(doc, schemaIn);
  const out: string[] = [];
  if (schema.maximum !== undefined) out.push(String(schema.maximum), String(schema.maximum + 1));
  if (schema.minimum !== undefined) out.push(String(schema.minimum), String(schema.minimum - 1));
  if (schema.maxLength !== undefined) out.push("s".repeat(schema.maxLength), "s".repeat(schema.maxLength + 1));
  return out;
}

/**
 * Whether a query value is valid by the document, read as an integrator would:
 * a number only in plain decimal notation, a boolean only as `true` or `false`.
 * Undefined where the document does not decide (a boolean sent as `1`).
 */
export function queryValueValid(validate: Validator, doc: OpenApiDocument, schemaIn: Schema, raw: string): boolean | undefined {
  const schema = deref(doc, schemaIn);
  const types = typesOf(schema);
  if (types.includes("integer") && /^-?\d+$/.test(raw)) return validate(schema, Number(raw)).length === 0;
  if (types.includes("number") && /^-?\d+(\.\d+)?$/.test(raw)) return validate(schema, Number(raw)).length === 0;
  if (types.includes("boolean")) {
    if (raw === "true" || raw === "false") return true;
    if (raw === "1" || raw === "0") return undefined;
  }
  if (types.includes("string") || types.length === 0) return validate(schema, raw).length === 0;
  return false;
}
