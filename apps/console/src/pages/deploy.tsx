import type { PageDefinition } from "../router/pages";

// A placeholder: issue 42's deploy page is built here (this file is the page's own).
function Deploy() {
  return (
    <>
      <h1>Deploy</h1>
      <p>This page is not built yet.</p>
    </>
  );
}

export const page: PageDefinition = { path: "/deploy", title: "Deploy", nav: 30, component: Deploy };
