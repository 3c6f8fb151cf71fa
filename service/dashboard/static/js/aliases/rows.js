// A row of the aliases list: the link with a Copy button, what it is a link to, whether it
// works now (and why not), its views against its limit, its expiry, whether a password guards
// it, when it was made, and its buttons (Copy link, Edit, Disable or Enable, Delete).

import { el } from "../dom.js";
import { cell, rowButton } from "../table.js";
import { when } from "../time.js";

// Whether the alias answers now, in a word, and why not: disabled, expired or used up.
export function aliasState(alias, now = Date.now()) {
  if (alias.enabled === false) {
    return { text: "Disabled", on: false };
  }
  const expires = typeof alias.expires_at === "string" ? Date.parse(alias.expires_at) : NaN;
  if (!Number.isNaN(expires) && expires <= now) {
    return { text: "Expired", on: false };
  }
  if (Number.isInteger(alias.max_views) && alias.views >= alias.max_views) {
    return { text: "Used up", on: false };
  }
  return { text: "Enabled", on: true };
}

export function viewsText(alias) {
  const views = Number.isInteger(alias.views) ? alias.views : 0;
  return Number.isInteger(alias.max_views) ? `${views} of ${alias.max_views}` : `${views} (no limit)`;
}

// `target`: {kind: "File" | "Folder", name} as the page found it. `actions`: {copy(alias,
// button), edit(alias, button), toggle(alias, button), remove(alias)}.
export function aliasRow(alias, target, actions) {
  const state = aliasState(alias);
  const about = ` alias ${alias.slug}`;
  const copy = rowButton("Copy link", "secondary", about);
  copy.addEventListener("click", () => actions.copy(alias, copy));
  const edit = rowButton("Edit", "secondary", about);
  edit.addEventListener("click", () => actions.edit(alias, edit));
  const toggle =
    alias.enabled === false ? rowButton("Enable", "secondary", about) : rowButton("Disable", "danger", about);
  toggle.dataset.action = alias.enabled === false ? "enable" : "disable";
  toggle.addEventListener("click", () => actions.toggle(alias, toggle));
  const remove = rowButton("Delete", "danger", about);
  remove.addEventListener("click", () => actions.remove(alias));
  const link = el("div", { className: "alias-link" }, [
    el("a", { text: alias.url, attrs: { href: alias.url, target: "_blank", rel: "noopener noreferrer" } }),
  ]);
  const row = el("tr", { className: state.on ? "" : "is-disabled" }, [
    cell("Link", "key-name alias-url", link),
    // One piece: on a phone's card its parts stay together beside the label.
    cell("Of", "alias-target", el("span", {}, [
      el("span", { className: "hint", text: `${target.kind} ` }),
      document.createTextNode(target.name),
    ])),
    cell("Status", "alias-status", el("span", { className: state.on ? "badge is-on" : "badge is-off", text: state.text })),
    cell("Views", "alias-views", document.createTextNode(viewsText(alias))),
    cell("Expires", "alias-expires", when(alias.expires_at, "Never")),
    cell("Password", "alias-password", document.createTextNode(alias.password_protected ? "Set" : "None")),
    cell("Created", "alias-created", when(alias.created_at, "—")),
    cell("Actions", "key-actions", el("div", { className: "row-actions" }, [copy, edit, toggle, remove])),
  ]);
  row.dataset.aliasId = alias.id;
  return row;
}
