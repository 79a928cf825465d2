import type { PageDefinition } from "../router/pages";

// A placeholder: issue 42's credits page is built here (this file is the page's own).
function Credits() {
  return (
    <>
      <h1>Credits</h1>
      <p>This page is not built yet.</p>
    </>
  );
}

export const page: PageDefinition = { path: "/credits", title: "Credits", nav: 50, signedIn: true, component: Credits };
