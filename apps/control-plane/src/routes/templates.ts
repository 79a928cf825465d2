import { TemplateListQuery, TemplateListResponse, TemplateResponse } from "@cm/protocol";
import { z } from "zod";
import type { Deps } from "../deps";
import { ApiError } from "../errors";
import { presentTemplateDetail, presentTemplateSummary } from "../http/presenters";
import { createRouter, json, PathParam, type RouteFactory } from "../http/route";

const TemplateParams = z.object({ idOrSlug: PathParam.meta({ description: "a template id or slug" }) });

/** The public template catalogue; mounted at /templates. */
export function templateRoutes(deps: Deps, route: RouteFactory) {
  const tags = ["templates"];
  return createRouter()
    .openapi(
      route({
        method: "get",
        path: "/",
        operationId: "listTemplates",
        tags,
        summary: "Browse templates",
        description: "Public. search matches name and description, case-insensitive.",
        request: { query: TemplateListQuery },
        responses: { 200: json(TemplateListResponse, "The matching templates") },
      }),
      async (c) => c.json({ templates: (await deps.repos.templates.list(c.req.valid("query"))).map(presentTemplateSummary) }, 200),
    )
    .openapi(
      route(
        {
          method: "get",
          path: "/{idOrSlug}",
          operationId: "getTemplate",
          tags,
          summary: "A template's details",
          description: "Public. By the template's id or its slug; the detail adds the image, default environment, ports and minimums.",
          request: { params: TemplateParams },
          responses: { 200: json(TemplateResponse, "The template") },
        },
        { errors: ["TEMPLATE_NOT_FOUND"] },
      ),
      async (c) => {
        const t = await deps.repos.templates.getByIdOrSlug(c.req.valid("param").idOrSlug);
        if (!t) throw new ApiError("TEMPLATE_NOT_FOUND");
        return c.json({ template: presentTemplateDetail(t) }, 200);
      },
    );
}
