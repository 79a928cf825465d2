import type { PageDefinition } from "./pages";

/**
 * Every page of the console: each file in src/pages/ that exports `page`. Vite reads the
 * folder at build time, so a new page needs no line here (and two people adding pages
 * never edit the same one).
 */
const modules = import.meta.glob<{ page?: PageDefinition }>("../pages/*.tsx", { eager: true });

export const PAGES: PageDefinition[] = Object.entries(modules)
  .map(([file, mod]) => {
    if (!mod.page) throw new Error(`${file} exports no \`page\``);
    return mod.page;
  })
  // A fixed path wins over a parameter at the same place: /deployments/new before /deployments/:id.
  .sort((a, b) => specificity(b.path) - specificity(a.path));

export const NAV: PageDefinition[] = PAGES.filter((p) => p.nav !== undefined).sort((a, b) => a.nav! - b.nav!);

function specificity(path: string): number {
  return path.split("/").reduce((n, seg) => n + (seg.startsWith(":") ? 1 : seg ? 2 : 0), 0);
}
