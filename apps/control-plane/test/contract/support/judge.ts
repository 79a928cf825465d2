import { type DocumentedOperation, documentedCodes, isProtected, type OpenApiDocument, type Validator } from "./document";
import { describeRequest, type FuzzRequest, send, urlOf, validity } from "./requests";

/*
 * Holds one answer to the document: its status documented for the operation,
 * its body in the documented schema, its error in the one shape with a
 * documented code, and validity honoured both ways.
 */

export type Violation = { rule: string; request: string; answer: string };

/** Figures for the report: requests sent, statuses seen, slowest answer. */
export type Figures = { requests: number; valid: number; invalid: number; undecided: number; slowestMs: number; statuses: Map<number, number> };

/** Sends one request and returns every way its answer disagrees with the document. */
export async function exercise(
  baseUrl: string,
  doc: OpenApiDocument,
  validate: Validator,
  target: DocumentedOperation,
  req: FuzzRequest,
  token: string,
  figures: Figures,
): Promise<{ found: Violation[]; request: string; answer: string }> {
  const { op, method } = target;
  const url = urlOf(baseUrl, target, req);
  const answer = await send(url, method, req, token);
  const valid = validity(doc, validate, target, req);
  figures.requests++;
  figures.slowestMs = Math.max(figures.slowestMs, answer.ms);
  if (valid === true) figures.valid++;
  else if (valid === false) figures.invalid++;
  else figures.undecided++;

  const request = describeRequest(method, url, req, valid);
  const out: Violation[] = [];
  if ("error" in answer) return { found: [{ rule: "no answer (connection failed)", request, answer: answer.error }], request, answer: "no answer" };
  const { status, json, text } = answer;
  figures.statuses.set(status, (figures.statuses.get(status) ?? 0) + 1);
  const said = `${status} ${text.slice(0, 240)}`;
  const fail = (rule: string) => out.push({ rule, request, answer: said });

  const documented = op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`] ?? op.responses.default;
  const code = (json as { error?: { code?: unknown } } | undefined)?.error?.code;
  if (!documented) fail(`status ${status}${typeof code === "string" ? ` ${code}` : ""} is not documented`);
  if (status >= 500 && !(documented && typeof code === "string" && documentedCodes(documented).includes(code)))
    fail(`a 5xx that is not documented: ${status} ${String(code)}`);

  const schema = documented?.content?.["application/json"]?.schema;
  if (schema) {
    if (json === undefined) fail(`${status} has no JSON body`);
    else {
      const errors = validate(schema, json);
      if (errors.length) fail(`${status} body does not match its schema: ${errors.slice(0, 2).join("; ")}`);
    }
    if (!answer.contentType?.startsWith("application/json")) fail(`${status} content-type is ${answer.contentType}`);
  }
  if (status >= 400) {
    if (validate(doc.components.schemas.Error!, json).length > 0) fail(`${status} is not in the error shape`);
    else if (documented && documentedCodes(documented).length > 0 && !documentedCodes(documented).includes(code as string))
      fail(`${status} ${String(code)} is not a code documented for ${status}`);
    // The client must learn which field to fix (unless the body is not an object at all).
    const wholeBodyWrong =
      req.body !== undefined && "json" in req.body && (typeof req.body.json !== "object" || req.body.json === null || Array.isArray(req.body.json));
    if (code === "VALIDATION_ERROR" && !wholeBodyWrong && !namesAField(json)) fail(`400 VALIDATION_ERROR names no field${fieldsNamed(json)}`);
  }

  const authorized = !isProtected(doc, op) || req.auth === "valid";
  if (!authorized && status >= 200 && status < 300) fail("a protected operation answered 2xx without a valid token");
  if (!authorized && valid === true && status !== 401) fail(`a valid request without a valid token got ${status}, not 401`);
  if (valid === true && authorized) {
    if (status === 400 && (code === "VALIDATION_ERROR" || code === "INVALID_JSON"))
      fail(`a request the document calls valid was refused with 400 ${code}${fieldsNamed(json)}`);
    if (status === 415 || status === 414 || status === 431) fail(`a request the document calls valid was refused with ${status}`);
  }
  if (valid === false) {
    if (status >= 200 && status < 300) fail(`a request the document calls invalid was accepted with ${status}`);
    if (status >= 500) fail(`a request the document calls invalid got ${status} ${String(code)}, not a 4xx`);
  }
  return { found: out, request, answer: typeof code === "string" ? `${status} ${code}` : String(status) };
}

function namesAField(json: unknown): boolean {
  const details = (json as { error?: { details?: unknown } }).error?.details;
  return Array.isArray(details) && details.some((d: { field?: unknown }) => typeof d.field === "string" && d.field.length > 0);
}

/** The fields a validation error names, so each distinct refusal is reported once. */
function fieldsNamed(json: unknown): string {
  const details = (json as { error?: { details?: unknown } }).error?.details;
  if (!Array.isArray(details)) return "";
  const fields = details.map((d: { field?: unknown; message?: unknown }) => `${String(d.field)}: ${String(d.message).replace(/\d+/g, "N")}`);
  return ` on ${[...new Set(fields)].sort().join(", ")}`;
}
