// The aliases page (/aliases): the account's public links, newest first, a page at a time:
// each link to copy, what it leads to, whether it works now, its views against its limit, its
// expiry and whether a password guards it; create one, edit one (its address, expiry, view
// limit, password, whether it works), disable or enable it, and delete it behind a
// confirmation.

import { ApiError, describe, failedText } from "../api.js";
import { sessionCaller } from "../caller.js";
import { createAliasDialog } from "../aliases/create.js";
import { editAliasDialog } from "../aliases/edit.js";
import { aliasRow } from "../aliases/rows.js";
import { byId, confirmation, hide, show } from "../dom.js";
import { signedInFrame } from "../layout.js";
import { requireSession } from "../session.js";

const PAGE_SIZE = "100";

// What an alias leads to, by name: {kind, name}; the id when it cannot be read.
async function describeTarget(call, target, known) {
  const key = `${target.type}:${target.id}`;
  if (!known.has(key)) {
    const path = target.type === "folder" ? "folders" : "files";
    known.set(
      key,
      call("GET", `/${path}/${encodeURIComponent(target.id)}`).then(
        (found) => {
          const above = Array.isArray(found.path) ? found.path.map((folder) => folder.name) : [];
          return [...above, found.name].join(" / ");
        },
        () => target.id,
      ),
    );
  }
  return { kind: target.type === "folder" ? "Folder" : "File", name: await known.get(key) };
}

function start(session) {
  const call = sessionCaller(session.token);
  signedInFrame("aliases", session, { call });
  const pageStatus = byId("page-status");
  const table = byId("aliases-table");
  const tbody = byId("aliases-body");
  const loading = byId("aliases-loading");
  const empty = byId("aliases-empty");
  const listError = byId("aliases-error");
  const listTitle = byId("aliases-title");
  const more = byId("aliases-more");
  const copyStatus = byId("alias-copy-status");
  let nextCursor = null;
  let targets = new Map(); // "file:fil_…" -> the promise of its name, for one listing

  async function copy(alias, button) {
    try {
      await navigator.clipboard.writeText(alias.url);
      copyStatus.textContent = `Copied ${alias.url} to the clipboard.`;
    } catch {
      const link = button.closest("tr").querySelector(".alias-link a");
      window.getSelection().selectAllChildren(link);
      copyStatus.textContent = "Copying was blocked: the link is selected, copy it with Ctrl+C.";
    }
  }

  async function toggle(alias, button) {
    const enabling = alias.enabled === false;
    button.disabled = true;
    hide(pageStatus);
    try {
      await call("PATCH", `/aliases/${encodeURIComponent(alias.id)}`, { enabled: enabling });
      show(pageStatus, `${enabling ? "Enabled" : "Disabled"} the alias ${alias.slug}.`);
    } catch (failure) {
      button.disabled = false;
      if (!(failure instanceof ApiError && failure.code === "alias_not_found")) {
        show(byId("page-error"), failedText(enabling ? "Enabling the alias" : "Disabling the alias", failure));
        return;
      }
      show(pageStatus, failure.message);
    }
    await refresh();
    listTitle.focus();
  }

  const deleteDialog = byId("alias-delete-dialog");
  const asked = confirmation({
    dialog: deleteDialog,
    cancel: byId("alias-delete-cancel"),
    confirm: byId("alias-delete-confirm"),
    error: byId("alias-delete-error"),
  });

  function remove(alias, target) {
    byId("alias-delete-name").textContent = alias.slug;
    byId("alias-delete-description").textContent =
      `The link ${alias.url} answers “not found” from now on, to everyone. ` +
      `The ${target.kind.toLowerCase()} ${target.name} itself is kept. This cannot be undone.`;
    asked.open(async (report) => {
      try {
        await call("DELETE", `/aliases/${encodeURIComponent(alias.id)}`);
        asked.close("deleted");
        show(pageStatus, `Deleted the alias ${alias.slug}.`);
      } catch (failure) {
        if (!(failure instanceof ApiError && failure.code === "alias_not_found")) {
          report(failure instanceof ApiError ? describe(failure) : "Deleting failed.");
          return;
        }
        asked.close("gone");
        show(pageStatus, failure.message);
      }
      await refresh();
      listTitle.focus();
    });
  }

  // Made when the page starts (below): its refresh is this page's.
  let edit = null;

  async function rows(aliases) {
    const named = await Promise.all(aliases.map((alias) => describeTarget(call, alias.target || {}, targets)));
    return aliases.map((alias, index) =>
      aliasRow(alias, named[index], { copy, edit, toggle, remove: (chosen) => remove(chosen, named[index]) }),
    );
  }

  async function load(append) {
    const query = append ? { limit: PAGE_SIZE, cursor: nextCursor } : { limit: PAGE_SIZE };
    const data = await call("GET", `/aliases?${new URLSearchParams(query)}`);
    nextCursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
    const made = await rows(Array.isArray(data.aliases) ? data.aliases : []);
    if (append) {
      tbody.append(...made);
    } else {
      tbody.replaceChildren(...made);
    }
    table.hidden = tbody.children.length === 0;
    empty.hidden = tbody.children.length !== 0;
    more.hidden = nextCursor === null;
  }

  async function refresh() {
    hide(listError);
    targets = new Map();
    try {
      await load(false);
    } catch (failure) {
      show(listError, failedText("Loading your aliases", failure));
    } finally {
      loading.hidden = true;
    }
  }

  more.addEventListener("click", async () => {
    if (nextCursor === null) {
      return;
    }
    more.disabled = true;
    hide(listError);
    try {
      await load(true);
    } catch (failure) {
      show(listError, failedText("Loading more aliases", failure));
    } finally {
      more.disabled = false;
    }
  });

  const dialogPage = {
    call,
    refresh,
    announce: (text) => show(pageStatus, text),
    focusList: () => listTitle.focus(),
  };
  createAliasDialog(dialogPage);
  edit = editAliasDialog(dialogPage);

  // The kill switch of the settings, said above the list when it is off.
  call("GET", "/settings").then(
    (settings) => {
      byId("aliases-off").hidden = settings.public_aliases_enabled !== false;
    },
    () => {},
  );
  refresh();
}

const session = requireSession("Sign in to manage your aliases.");
if (session) {
  start(session);
}
