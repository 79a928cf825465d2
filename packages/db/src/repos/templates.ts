import { and, asc, eq, or, type SQL } from "drizzle-orm";
import { containsIgnoreCase, type DbHandle } from "../client";
import type { TemplateRow } from "../types";

export function createTemplatesRepo(h: DbHandle) {
  const { templates } = h.t;
  return {
    /** Inserts or refreshes the catalogue at start: the seed in code is the source of truth. */
    async seed(rows: TemplateRow[]) {
      await h.transaction(async (db) => {
        for (const row of rows) {
          const { id, ...rest } = row;
          await db.insert(templates).values(row).onConflictDoUpdate({ target: templates.id, set: rest });
        }
      });
    },
    async list(f: { category?: string; requiresGpu?: boolean; search?: string }): Promise<TemplateRow[]> {
      const c: Array<SQL | undefined> = [];
      if (f.category) c.push(eq(templates.category, f.category));
      if (f.requiresGpu !== undefined) c.push(eq(templates.requiresGpu, f.requiresGpu));
      if (f.search) c.push(or(containsIgnoreCase(templates.name, f.search), containsIgnoreCase(templates.description, f.search)));
      return h.run((db) =>
        db
          .select()
          .from(templates)
          .where(and(...c))
          .orderBy(asc(templates.sortOrder)),
      );
    },
    async getByIdOrSlug(idOrSlug: string): Promise<TemplateRow | undefined> {
      return h.run(
        async (db) =>
          (
            await db
              .select()
              .from(templates)
              .where(or(eq(templates.id, idOrSlug), eq(templates.slug, idOrSlug)))
          )[0],
      );
    },
  };
}
export type TemplatesRepo = ReturnType<typeof createTemplatesRepo>;
