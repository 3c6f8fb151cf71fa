// The files page (/files, /files?folder=fld_…): one folder at a time (the top level without
// ?folder), its breadcrumbs, the folders in it then its files a page at a time; folders to
// create, open, rename, move and delete, files to download, rename, move and delete, and
// uploads by picker or drag and drop into the open folder. The address names the open folder,
// so a reload, the back button and a copied link show the same one.

import { ApiError, describe, failedText, fetchBlob, sessionCaller, sessionEnded } from "../api.js";
import { byId, confirmation, el, hide, onClick, show } from "../dom.js";
import { folderDeleteDialog, moveDialog, nameDialog } from "../files/dialogs.js";
import { shareAction } from "../files/share.js";
import { TOP, breadcrumbs, fileRow, folderHref, folderRow } from "../files/rows.js";
import { uploads } from "../files/upload.js";
import { childrenOf, folderTree } from "../folders.js";
import { signedInFrame } from "../layout.js";
import { requireSession, signedOut } from "../session.js";

const PAGE_SIZE = "100";
const FOLDER_ID = /^fld_[0-9A-Za-z]{1,60}$/;

// The folder the address names, or null for the top level.
function folderInAddress() {
  const id = new URLSearchParams(window.location.search).get("folder");
  return id && FOLDER_ID.test(id) ? id : null;
}

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

// Where a file or folder may be moved to: the top level, then every folder by its path; for a
// folder, neither itself nor anything below it.
async function destinations(call, moving) {
  const { folders } = await folderTree(call);
  const choices = [{ value: "", text: `${TOP} (the top level)` }];
  let inside = null; // the depth of the folder being moved while walking its subtree
  for (const folder of folders) {
    if (inside !== null && folder.depth > inside) {
      continue;
    }
    inside = null;
    if (moving && folder.id === moving) {
      inside = folder.depth;
      continue;
    }
    choices.push({ value: folder.id, text: folder.path });
  }
  return choices;
}

function start(session) {
  const token = session.token;
  const call = sessionCaller(token);
  signedInFrame("files", session, { call, logoutFailed });
  const pageStatus = byId("page-status");
  const pageError = byId("page-error");
  const table = byId("files-table");
  const foldersBody = byId("folders-body");
  const tbody = byId("files-body");
  const loading = byId("files-loading");
  const empty = byId("files-empty");
  const listError = byId("files-error");
  const listTitle = byId("files-title");
  const crumbs = byId("breadcrumbs");
  const uploadFolder = byId("upload-folder");
  const more = byId("files-more");
  let open = null; // the open folder, {id, name, path}, or null at the top level
  let nextCursor = null;
  let loads = 0; // which load is the latest: an older one that ends later is dropped

  const filesPath = (cursor) => {
    const query = { folder_id: open ? open.id : "root", limit: PAGE_SIZE };
    return `/files?${new URLSearchParams(cursor ? { ...query, cursor } : query)}`;
  };

  function syncEmpty() {
    const count = tbody.children.length + foldersBody.children.length;
    table.hidden = count === 0;
    empty.hidden = count !== 0;
  }

  // After a change: say what was done, show the folder as it now is, the focus on its list.
  async function changed(said) {
    if (said) {
      show(pageStatus, said);
    }
    await refresh();
    listTitle.focus();
  }

  const askName = nameDialog(changed);
  const askMove = moveDialog(changed);
  const askFolderDelete = folderDeleteDialog(call, changed, (text) => show(pageError, text));
  const openDelete = deleteDialog(call, pageStatus, async () => {
    await refresh();
    listTitle.focus();
  });

  async function moveWith(what, moving, current, save) {
    hide(pageError);
    let choices;
    try {
      choices = await destinations(call, moving);
    } catch (failure) {
      show(pageError, failedText("Listing the folders", failure));
      return;
    }
    askMove({ what, choices, current: current || "", save });
  }

  const folderActions = {
    go: (id) => go(id, true),
    rename: (folder) =>
      askName({
        heading: `Rename the folder ${folder.name}`,
        action: "Rename folder",
        value: folder.name,
        save: async (name) => {
          await call("PATCH", `/folders/${encodeURIComponent(folder.id)}`, { name });
          return `Renamed the folder ${folder.name} to ${name}.`;
        },
      }),
    move: (folder) =>
      moveWith(folder.name, folder.id, folder.parent_id, async (target) => {
        await call("PATCH", `/folders/${encodeURIComponent(folder.id)}`, { parent_id: target || null });
        return `Moved the folder ${folder.name}.`;
      }),
    remove: (folder) => askFolderDelete(folder),
  };

  const fileActions = {
    download: (file, button) => download(token, file, button, pageError),
    share: shareAction(call, pageError),
    rename: (file) =>
      askName({
        heading: `Rename ${file.name}`,
        action: "Rename file",
        value: file.name,
        save: async (name) => {
          await call("PATCH", `/files/${encodeURIComponent(file.id)}`, { name });
          return `Renamed ${file.name} to ${name}.`;
        },
      }),
    move: (file) =>
      moveWith(file.name, null, file.folder_id, async (target) => {
        await call("PATCH", `/files/${encodeURIComponent(file.id)}`, { folder_id: target || null });
        return `Moved ${file.name}.`;
      }),
    remove: (file) => openDelete(file),
  };

  function showFolder() {
    breadcrumbs(crumbs, open, folderActions.go);
    listTitle.textContent = open ? open.name : "Your files";
    uploadFolder.textContent = open ? open.name : "the top level";
    document.title = `${open ? `${open.name} · ` : ""}Files · filehost`;
  }

  // The open folder's folders and its first page of files, in place of the list.
  async function load() {
    const mine = ++loads;
    const [folders, files] = await Promise.all([
      childrenOf(call, open ? open.id : null),
      call("GET", filesPath(null)),
    ]);
    if (mine !== loads) {
      return;
    }
    foldersBody.replaceChildren(...folders.map((folder) => folderRow(folder, folderActions)));
    nextCursor = typeof files.next_cursor === "string" ? files.next_cursor : null;
    tbody.replaceChildren(...(Array.isArray(files.files) ? files.files : []).map((file) => fileRow(file, fileActions)));
    more.hidden = nextCursor === null;
    syncEmpty();
  }

  async function refresh() {
    hide(listError);
    try {
      await load();
    } catch (failure) {
      if (failure instanceof ApiError && failure.code === "folder_not_found" && open) {
        show(listError, `The folder ${open.name} no longer exists: it was deleted or moved away.`);
        foldersBody.replaceChildren();
        tbody.replaceChildren();
        table.hidden = true;
        more.hidden = true;
        return;
      }
      show(listError, failure instanceof ApiError ? describe(failure) : "Loading files failed.");
    } finally {
      loading.hidden = true;
    }
  }

  // Opens the folder `id` (null: the top level); `push` adds it to the history (a click), else
  // the address already names it (arrival, the back button).
  async function go(id, push) {
    if (push) {
      window.history.pushState({ folder: id }, "", folderHref(id));
      hide(pageStatus);
    }
    hide(pageError);
    hide(listError);
    if (!id) {
      open = null;
    } else {
      try {
        const folder = await call("GET", `/folders/${encodeURIComponent(id)}`);
        open = { id: folder.id, name: folder.name, path: Array.isArray(folder.path) ? folder.path : [] };
      } catch (failure) {
        open = null;
        showFolder();
        foldersBody.replaceChildren();
        tbody.replaceChildren();
        table.hidden = true;
        empty.hidden = true;
        more.hidden = true;
        loading.hidden = true;
        show(listError, failure instanceof ApiError && failure.code === "folder_not_found"
          ? "This folder does not exist, or was deleted. Go back to all files above."
          : failedText("Opening the folder", failure));
        return;
      }
    }
    showFolder();
    await refresh();
    if (push) {
      listTitle.focus();
    }
  }

  onClick(byId("folder-create"), () => {
    hide(pageStatus);
    const parent = open;
    askName({
      heading: parent ? `New folder in ${parent.name}` : "New folder",
      action: "Create folder",
      value: "",
      save: async (name) => {
        await call("POST", "/folders", parent ? { name, parent_id: parent.id } : { name });
        return `Created the folder ${name}.`;
      },
    });
  });

  more.addEventListener("click", async () => {
    if (nextCursor === null) {
      return;
    }
    more.disabled = true;
    hide(listError);
    try {
      const data = await call("GET", filesPath(nextCursor));
      nextCursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
      tbody.append(...(Array.isArray(data.files) ? data.files : []).map((file) => fileRow(file, fileActions)));
      more.hidden = nextCursor === null;
      syncEmpty();
    } catch (failure) {
      show(listError, failure instanceof ApiError ? describe(failure) : "Loading files failed.");
    } finally {
      more.disabled = false;
    }
  });

  window.addEventListener("popstate", () => go(folderInAddress(), false));

  uploads(token, session.email, pageStatus, () => {
    refresh();
  }, () => (open ? { id: open.id, name: open.name } : { id: null, name: "the top level" }));
  go(folderInAddress(), false);
}

const session = requireSession("Sign in to manage your files.");
if (session) {
  start(session);
}
