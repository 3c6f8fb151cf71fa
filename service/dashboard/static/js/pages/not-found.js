// The page for an address the dashboard does not have (served with status 404): the same
// frame as every page, with the navigation when signed in, and where to go from here.

import { sessionCaller } from "../caller.js";
import { byId, el } from "../dom.js";
import { PAGES, signedInFrame, signedOutFrame } from "../layout.js";
import { loadSession } from "../session.js";

function link(href, text) {
  return el("li", {}, [el("a", { text, attrs: { href } })]);
}

function start() {
  byId("not-found-path").textContent = window.location.pathname;
  const links = byId("not-found-links");
  const session = loadSession();
  if (session) {
    signedInFrame(null, session, { call: sessionCaller(session.token) });
    links.replaceChildren(...PAGES.map(({ href, text }) => link(href, text)));
  } else {
    signedOutFrame();
    links.replaceChildren(link("/", "Sign in"));
  }
}

start();
