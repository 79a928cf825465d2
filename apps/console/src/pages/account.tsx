import type { PageDefinition } from "../router/pages";

// A placeholder: issue 42's account page is built here (this file is the page's own).
function Account() {
  return (
    <>
      <h1>Account</h1>
      <p>This page is not built yet.</p>
    </>
  );
}

export const page: PageDefinition = { path: "/account", title: "Account", nav: 70, signedIn: true, component: Account };
