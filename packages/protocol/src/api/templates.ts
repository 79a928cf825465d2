import { z } from "zod";
import { TEMPLATE_CATEGORIES } from "../lists";
import { queryBoolean, text } from "./common";

export { TEMPLATE_CATEGORIES };
export const TemplateCategory = z.enum(TEMPLATE_CATEGORIES);

export const TemplatePort = z.object({ internal: z.number().int(), protocol: z.string(), description: z.string() });

export const TemplateSummary = z
  .object({
    id: z.string(),
    slug: z.string(),
    name: z.string(),
    description: z.string(),
    category: TemplateCategory,
    requiresGpu: z.boolean(),
    minGpuVram: z.number().int().meta({ description: "MB" }),
  })
  .meta({ id: "TemplateSummary" });

export const TemplateDetail = TemplateSummary.extend({
  containerImage: z.string(),
  defaultEnv: z.record(z.string(), z.string()),
  ports: z.array(TemplatePort),
  minCpuCores: z.number().int(),
  minRamMb: z.number().int(),
  minDiskGb: z.number().int(),
  estimatedPullTime: z.number().int().meta({ description: "seconds, on a 1 Gbit/s link with an empty image cache" }),
}).meta({ id: "TemplateDetail" });
export type TemplateDetail = z.infer<typeof TemplateDetail>;

export const TemplateListQuery = z.strictObject({
  category: TemplateCategory.optional(),
  requiresGpu: queryBoolean.optional(),
  search: text().max(100).optional(),
});
export const TemplateListResponse = z.object({ templates: z.array(TemplateSummary) });
export const TemplateResponse = z.object({ template: TemplateDetail });
