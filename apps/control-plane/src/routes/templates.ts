import { TemplateListQuery, TemplateListResponse, TemplateResponse } from "@cm/protocol";
import { ApiError } from "../errors";
import { param, type ApiRouter } from "../http/api-router";
import { presentTemplateDetail, presentTemplateSummary } from "../http/presenters";
import type { Deps } from "../deps";

export function templateRoutes(api: ApiRouter, deps: Deps) {
  api.get("/templates", { tag: "templates", summary: "Browse templates", description: "Public. search matches name and description, case-insensitive.", query: TemplateListQuery, response: TemplateListResponse }, async (c, { query }) =>
    c.json({ templates: (await deps.repos.templates.list(query)).map(presentTemplateSummary) }),
  );
  api.get("/templates/:idOrSlug", { tag: "templates", summary: "A template's details", response: TemplateResponse, errors: ["TEMPLATE_NOT_FOUND"] }, async (c) => {
    const t = await deps.repos.templates.getByIdOrSlug(param(c, "idOrSlug"));
    if (!t) throw new ApiError("TEMPLATE_NOT_FOUND");
    return c.json({ template: presentTemplateDetail(t) });
  });
}
