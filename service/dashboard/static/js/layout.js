// The frame every page shares: the top bar with the service's name and, once signed in, the
// links between the pages, who is signed in and the Log out button. The pages' HTML holds
// only what is their own; this draws the rest, before the page's main content.

import { failedText } from "./api.js";
import { byId, el, hide, show } from "./dom.js";
import { toLogin } from "./session.js";

// The signed-in pages, in the order the navigation lists them.
export const PAGES = [
  { page: "keys", href: "/keys", text: "API keys" },
  { page: "files", href: "/files", text: "Files" },
  { page: "aliases", href: "/aliases", text: "Aliases" },
  { page: "sessions", href: "/sessions", text: "Sessions" },
  { page: "security", href: "/security", text: "Security" },
  { page: "activity", href: "/activity", text: "Activity" },
  { page: "settings", href: "/settings", text: "Settings" },
];

function topbar(children) {
  // The bar's content keeps to the page's width (style.css): one layout on every page.
  const header = el("header", { className: "topbar" }, [
    el("div", { className: "bar" }, [el("p", { className: "brand", text: "filehost" }), ...children]),
  ]);
  document.body.insertBefore(header, byId("main"));
  return header;
}

// The login page's frame: the name alone.
export function signedOutFrame() {
  topbar([]);
}

function navigation(current) {
  return el(
    "nav",
    { className: "pages", attrs: { "aria-label": "Pages" } },
    PAGES.map(({ page, href, text }) =>
      el("a", {
        text,
        attrs: page === current ? { id: `nav-${page}`, href, "aria-current": "page" } : { id: `nav-${page}`, href },
      }),
    ),
  );
}

// What a refused logout says by default.
function logoutFailedText(failure) {
  return `${failedText("Logging out", failure)} You are still signed in here, and the session may still be valid.`;
}

// The frame of a signed-in page: `current` names it among the pages.
//
// Log out says "logged out" only when the server says the session has ended: after a refusal
// (429, 503, a network failure) the session may still be valid, so the page stays, keeps the
// token for another try, and says so in #page-error, in `logoutFailed(failure)`'s words. A
// 401 saying the session is already over goes to sign in (`call` does that). `beforeLeave`
// runs just before the page is left for the login page.
export function signedInFrame(current, session, { call, logoutFailed = logoutFailedText, beforeLeave }) {
  const logout = el("button", { text: "Log out", className: "secondary", attrs: { id: "logout", type: "button" } });
  topbar([
    navigation(current),
    el("div", { className: "account" }, [
      el("span", { className: "who" }, [
        "Signed in as ",
        el("strong", { text: session.email || "", attrs: { id: "account-email" } }),
      ]),
      logout,
    ]),
  ]);
  const pageError = byId("page-error");
  logout.addEventListener("click", async () => {
    logout.disabled = true;
    hide(pageError);
    let answer;
    try {
      answer = await call("POST", "/auth/logout");
    } catch (failure) {
      show(pageError, logoutFailed(failure));
      logout.disabled = false;
      return;
    }
    if (beforeLeave) {
      beforeLeave();
    }
    // Where the service says so (FILEHOST_OIDC_PROVIDER_LOGOUT), a session opened through the
    // OpenID provider ends there too, on the way back to the login page.
    const provider = answer && typeof answer.provider_logout_url === "string" ? answer.provider_logout_url : null;
    toLogin({ kind: "info", text: "You have logged out." }, provider);
  });
}
