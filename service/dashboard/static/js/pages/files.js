// The files page (/files): the account's files, a page at a time, to download or delete, and
// uploads by picker or drag and drop.

import { ApiError, describe, fetchBlob, sessionCaller, sessionEnded } from "../api.js";
import { byId, confirmation, el, hide, show } from "../dom.js";
import { size } from "../bytes.js";
import { uploads } from "../files/upload.js";
import { signedInFrame } from "../layout.js";
import { requireSession, signedOut } from "../session.js";
import { cell, rowButton } from "../table.js";
import { when } from "../time.js";

const PAGE = "/files?limit=100";

// This page's words for a refused logout.
function logoutFailed(failure) {
  const why = failure instanceof ApiError ? describe(failure) : "Logging out failed.";
  return `Logging out failed: ${why} You are still signed in here. Try again.`;
}

// The bytes come by fetch (the token goes in a header) and leave as a Blob, through a link
// made for the purpose.
async function download(token, file, button, pageError) {
  button.disabled = true;
  hide(pageError);
  try {
    const blob = await fetchBlob(`/files/${encodeURIComponent(file.id)}/content`, token);
    const url = URL.createObjectURL(blob);
    const link = el("a", { attrs: { href: url, download: file.name } });
    link.hidden = true;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  } catch (failure) {
    if (sessionEnded(failure)) {
      signedOut(failure);
      return;
    }
    show(pageError, `Downloading ${file.name} failed: ${failure instanceof ApiError ? describe(failure) : "try again."}`);
  } finally {
    button.disabled = false;
  }
}

function deleteDialog(call, pageStatus, afterwards) {
  const dialog = byId("delete-dialog");
  const name = byId("delete-name");
  const asked = confirmation({
    dialog,
    cancel: byId("delete-cancel"),
    confirm: byId("delete-confirm"),
    error: byId("delete-error"),
  });

  async function remove(file, report) {
    try {
      await call("DELETE", `/files/${encodeURIComponent(file.id)}`);
      dialog.close("deleted");
      show(pageStatus, `Deleted ${file.name}.`);
    } catch (failure) {
      if (!(failure instanceof ApiError && failure.code === "file_not_found")) {
        report(failure instanceof ApiError ? describe(failure) : "Deleting failed.");
        return;
      }
      dialog.close("gone");
      show(pageStatus, failure.message);
    }
    await afterwards();
  }

  return (file) => {
    name.textContent = file.name;
    asked.open((report) => remove(file, report));
  };
}

function start(session) {
  const token = session.token;
  const call = sessionCaller(token);
  signedInFrame("files", session, { call, logoutFailed });
  const pageStatus = byId("page-status");
  const pageError = byId("page-error");
  const table = byId("files-table");
  const tbody = byId("files-body");
  const loading = byId("files-loading");
  const empty = byId("files-empty");
  const listError = byId("files-error");
  const listTitle = byId("files-title");
  const more = byId("files-more");
  let nextCursor = null;

  const openDelete = deleteDialog(call, pageStatus, async () => {
    await refresh();
    listTitle.focus();
  });

  function fileRow(file) {
    const save = rowButton("Download", "secondary", ` ${file.name}`);
    save.addEventListener("click", () => download(token, file, save, pageError));
    const remove = rowButton("Delete", "danger", ` ${file.name}`);
    remove.addEventListener("click", () => openDelete(file));
    const row = el("tr", {}, [
      cell("Name", "key-name file-name", document.createTextNode(file.name)),
      cell("Size", "file-size", el("span", { text: size(file.size), attrs: { title: `${file.size} bytes` } })),
      cell("Type", "file-type", el("code", { text: file.content_type })),
      cell("Uploaded", "file-uploaded", when(file.created_at, "—")),
      cell("Actions", "key-actions", [save, remove]),
    ]);
    row.dataset.fileId = file.id;
    return row;
  }

  // The first page, in place of the list (`append` false), or the next one after it.
  async function load(append) {
    const path = append ? `${PAGE}&cursor=${encodeURIComponent(nextCursor)}` : PAGE;
    const data = await call("GET", path);
    nextCursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
    const rows = (Array.isArray(data.files) ? data.files : []).map(fileRow);
    if (append) {
      tbody.append(...rows);
    } else {
      tbody.replaceChildren(...rows);
    }
    const count = tbody.children.length;
    table.hidden = count === 0;
    empty.hidden = count !== 0;
    more.hidden = nextCursor === null;
  }

  async function refresh() {
    hide(listError);
    try {
      await load(false);
    } catch (failure) {
      show(listError, failure instanceof ApiError ? describe(failure) : "Loading files failed.");
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
      show(listError, failure instanceof ApiError ? describe(failure) : "Loading files failed.");
    } finally {
      more.disabled = false;
    }
  });

  uploads(token, pageStatus, () => {
    refresh();
  });
  refresh();
}

const session = requireSession("Sign in to manage your files.");
if (session) {
  start(session);
}
