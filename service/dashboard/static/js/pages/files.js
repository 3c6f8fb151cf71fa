// The files page (/files, /files?folder=fld_…): one folder at a time (the top level without
// ?folder), its breadcrumbs, the folders in it then its files a page at a time, as a list or a
// gallery, found by name, ordered and filtered by type; folders to create, open, rename, move,
// delete and download as a ZIP, files to preview, download, share, rename, move and delete,
// many at once from the bar above the list, and uploads by picker or drag and drop into the
// open folder. The address says all of what is shown (find.js), so a reload, the back button
// and a copied link show the same.

import { ApiError, describe, failedText, sessionEnded } from "../api.js";
import { sessionCaller } from "../caller.js";
import { byId, confirmation, hide, onClick, show } from "../dom.js";
import { bulkBar, saveArchive } from "../files/bulk.js";
import { folderDeleteDialog, moveDialog, nameDialog } from "../files/dialogs.js";
import { addressOf, findControls, listQuery, nameHolds, readAddress } from "../files/find.js";
import { gallery } from "../files/gallery.js";
import { previewer } from "../files/preview.js";
import { TOP, breadcrumbs, fileLink, fileRow, fileWhere, folderRow } from "../files/rows.js";
import { downloadByTicket } from "../files/save.js";
import { selection } from "../files/selection.js";
import { shareAction } from "../files/share.js";
import { uploads } from "../files/upload.js";
import { childrenOf, folderTree, newFolder } from "../folders.js";
import { signedInFrame } from "../layout.js";
import { requireSession, signedOut } from "../session.js";

const PAGE_SIZE = "100";
// The most files one read of the list may ask for (the service's bound of a page).
const MOST_ROWS = 1000;

// This page's words for a refused logout.
function logoutFailed(failure) {
  const why = failure instanceof ApiError ? describe(failure) : "Logging out failed.";
  return `Logging out failed: ${why} You are still signed in here. Try again.`;
}

// A file deleted meanwhile (in another tab, by a script): the service's 404 for it.
function fileGone(failure) {
  return failure instanceof ApiError && failure.code === "file_not_found";
}

// What is said of an action on a file or folder that no longer exists, which then leaves the
// list: "Renaming report.pdf failed: it no longer exists (deleted meanwhile), …".
function goneText(what, item) {
  return `${what} ${item.name} failed: it no longer exists (deleted meanwhile), so it has left the list.`;
}

// The browser downloads the file itself, by a ticket (save.js), streamed to disk with its own
// progress; `status` (a live region) says it began. A refusal is said in `said` (the page's alert,
// or the preview's error); a file deleted meanwhile is also `gone(file)`, which takes it off the
// list.
async function download(token, file, button, said, gone, status) {
  const focused = document.activeElement === button;
  button.disabled = true;
  hide(said);
  try {
    await downloadByTicket(token, { file_id: file.id }, () => {
      status.hidden = true;
      show(said, `Downloading ${file.name} failed: the service refused it. Try again.`);
    });
    show(status, `Downloading ${file.name}: your browser shows how far it has come.`);
  } catch (failure) {
    if (sessionEnded(failure)) {
      signedOut(failure);
      return;
    }
    if (fileGone(failure)) {
      show(said, goneText("Downloading", file));
      gone(file);
      return;
    }
    show(said, `Downloading ${file.name} failed: ${failure instanceof ApiError ? describe(failure) : "try again."}`);
  } finally {
    button.disabled = false;
    // Disabled while it worked, the button lost the focus to the page's body: it gets it back.
    if (focused && document.activeElement === document.body) {
      button.focus();
    }
  }
}

// `afterwards(said)` says what came of it and shows the list as it now is.
function deleteDialog(call, afterwards) {
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
    } catch (failure) {
      if (!fileGone(failure)) {
        report(failure instanceof ApiError ? describe(failure) : "Deleting failed.");
        return;
      }
      dialog.close("gone");
      await afterwards(`${file.name} was deleted already (elsewhere, meanwhile).`);
      return;
    }
    dialog.close("deleted");
    await afterwards(`Deleted ${file.name}.`);
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
  const tiles = byId("files-gallery");
  const loading = byId("files-loading");
  const empty = byId("files-empty");
  const noMatch = byId("files-no-match");
  const listError = byId("files-error");
  const listTitle = byId("files-title");
  const crumbs = byId("breadcrumbs");
  const uploadFolder = byId("upload-folder");
  const more = byId("files-more");
  let view = readAddress(); // what the address asks to show (find.js)
  let open = null; // the open folder, {id, name, path}, or null at the top level
  // Settles once `open` is the folder `go` was last asked for (the address names it at once).
  let opening = Promise.resolve();
  let shown = []; // the files in view, in their order
  let nextCursor = null;
  let loads = 0; // which load is the latest: an older one that ends later is dropped

  // The address as `view` says, a step of the history (`push`) or in place of the current one.
  function address(push) {
    window.history[push ? "pushState" : "replaceState"]({}, "", addressOf(view));
  }

  function syncEmpty() {
    const listed = view.view === "list" ? shown.length : 0;
    table.hidden = foldersBody.children.length + listed === 0;
    tiles.hidden = view.view !== "gallery" || shown.length === 0;
    const nothing = foldersBody.children.length + shown.length === 0;
    const filtered = Boolean(view.q || view.type);
    empty.hidden = !nothing || filtered;
    noMatch.hidden = !nothing || !filtered;
  }

  // After a change: say what was done (and what the service refused) in place of what an
  // earlier action said (an old failure beside a new success reads as the new one's), show the
  // folder as it now is, the focus on its list.
  async function changed(result) {
    const { said, failed } = typeof result === "string" ? { said: result, failed: "" } : result || {};
    if (said) {
      show(pageStatus, said);
    } else {
      hide(pageStatus);
    }
    if (failed) {
      show(pageError, failed);
    } else {
      hide(pageError);
    }
    // As far down as it was read, where it was on the page: a change deep in a long list keeps
    // the place it was made at.
    const rows = Math.min(MOST_ROWS, Math.max(Number(PAGE_SIZE), shown.length));
    const { scrollX, scrollY } = window;
    await refresh(String(rows));
    window.scrollTo(scrollX, scrollY);
    listTitle.focus({ preventScroll: true });
  }

  // A file the service says no longer exists leaves the list, read again as it now is; what an
  // earlier action said no longer stands beside the failure said of it.
  function gone() {
    hide(pageStatus);
    refresh();
  }

  // `change()` made to `item`, or, when the service answers that it no longer exists (`code`:
  // deleted meanwhile), what to say instead: the dialog then closes and the list is read again
  // without it.
  async function unlessGone(item, what, code, change) {
    try {
      return await change();
    } catch (failure) {
      if (failure instanceof ApiError && failure.code === code) {
        return { failed: goneText(what, item) };
      }
      throw failure;
    }
  }

  const askName = nameDialog(changed);
  const askMove = moveDialog(changed);
  const askFolderDelete = folderDeleteDialog(call, changed, (text) => show(pageError, text));
  const openDelete = deleteDialog(call, changed);

  async function moveWith(what, moving, current, save, already) {
    hide(pageError);
    let choices;
    try {
      choices = await destinations(call, moving);
    } catch (failure) {
      show(pageError, failedText("Listing the folders", failure));
      return;
    }
    askMove({ what, choices, current: current || "", save, already });
  }

  // One Share dialog for files and folders alike.
  const share = shareAction(call, pageError, (item) => changed({ failed: goneText("Sharing", item) }));
  const folderActions = {
    go: (id) => go(id, true),
    share,
    archive: (folder, button) =>
      saveArchive(token, { folder_id: folder.id }, `${folder.name}.zip`, button, pageStatus, pageError),
    rename: (folder) =>
      askName({
        heading: `Rename the folder ${folder.name}`,
        action: "Rename folder",
        value: folder.name,
        save: (name) =>
          unlessGone(folder, "Renaming the folder", "folder_not_found", async () => {
            await call("PATCH", `/folders/${encodeURIComponent(folder.id)}`, { name });
            return `Renamed the folder ${folder.name} to ${name}.`;
          }),
      }),
    move: (folder) =>
      moveWith(folder.name, folder.id, folder.parent_id, async (target) => {
        await call("PATCH", `/folders/${encodeURIComponent(folder.id)}`, { parent_id: target || null });
        return `Moved the folder ${folder.name}.`;
      }),
    remove: (folder) => askFolderDelete(folder),
  };

  const fileActions = {
    download: (file, button) => download(token, file, button, pageError, gone, pageStatus),
    share,
    rename: (file) =>
      askName({
        heading: `Rename ${file.name}`,
        action: "Rename file",
        value: file.name,
        save: (name) =>
          unlessGone(file, "Renaming", "file_not_found", async () => {
            await call("PATCH", `/files/${encodeURIComponent(file.id)}`, { name });
            return `Renamed ${file.name} to ${name}.`;
          }),
      }),
    move: (file) =>
      moveWith(file.name, null, file.folder_id, (target) =>
        unlessGone(file, "Moving", "file_not_found", async () => {
          await call("PATCH", `/files/${encodeURIComponent(file.id)}`, { folder_id: target || null });
          return `Moved ${file.name}.`;
        }),
      ),
    remove: (file) => openDelete(file),
  };

  const preview = previewer(token, {
    files: () => shown,
    more: () => nextCursor !== null,
    showMore: () => showMore(),
    download: (file, button) => download(token, file, button, byId("preview-error"), gone, byId("preview-note")),
    gone,
    // The list's title when the file has left the list meanwhile.
    focusFor: (file) => document.querySelector(`a[data-preview="${CSS.escape(file.id)}"]`) || listTitle,
    showing: (file) => {
      view = { ...view, preview: file.id };
      address(false);
    },
    closed: (file) => {
      // Unless the back button already went to another address.
      if (view.preview === file.id) {
        view = { ...view, preview: null };
        address(false);
      }
    },
  });
  const picked = selection(() => shown, (count) => syncBar(count));
  const syncBar = bulkBar(call, token, {
    chosen: () => picked.chosen(),
    here: () => (open ? open.id : ""),
    moveWith: (what, current, save) =>
      moveWith(what, null, current, save, `The ${what} are already there: choose another folder.`),
    afterwards: changed,
    pageStatus,
    pageError,
  });
  const link = (file) => fileLink(file, (one) => addressOf({ ...view, preview: one.id }), preview.open);
  const thumbs = gallery(token, { link, checkbox: picked.checkbox });

  // Each folder's path as a list of every folder's files says it ("Photos / 2024"), asked once
  // per folder each time the list is read.
  let paths = new Map();
  function pathText(id) {
    if (!paths.has(id)) {
      paths.set(id, call("GET", `/folders/${encodeURIComponent(id)}`).then((folder) =>
        [...(Array.isArray(folder.path) ? folder.path : []), folder].map((one) => one.name).join(" / ")));
    }
    return paths.get(id);
  }
  const where = (file) =>
    view.everywhere ? fileWhere(file, file.folder_id ? pathText(file.folder_id) : null, folderActions.go) : null;

  // The files of a page in the list or the gallery, after those shown (`append`) or in their
  // place.
  function draw(files, append) {
    shown = append ? [...shown, ...files] : files;
    if (view.view === "gallery") {
      tbody.replaceChildren();
      if (append) {
        thumbs.append(files);
      } else {
        thumbs.replace(shown);
      }
    } else {
      thumbs.replace([]);
      const rows = files.map((file) => fileRow(file, fileActions, link(file), picked.checkbox(file), where(file)));
      if (append) {
        tbody.append(...rows);
      } else {
        tbody.replaceChildren(...rows);
      }
    }
    picked.sync();
    syncEmpty();
  }

  // A search or a type shows only the folders it matches (by name; none for a type, nor in a
  // list of every folder's files).
  function matchingFolders(folders) {
    if (view.type || view.everywhere) {
      return [];
    }
    return folders.filter((folder) => nameHolds(folder.name, view.q));
  }

  const setControls = findControls((part, push) => {
    view = { ...view, ...part };
    address(push);
    setControls(view);
    hide(pageStatus);
    if ("view" in part) {
      draw(shown, false); // the same files, drawn the other way
      return;
    }
    showFolder();
    picked.clear();
    refresh();
  });

  function showFolder() {
    breadcrumbs(crumbs, open, folderActions.go);
    listTitle.textContent = view.everywhere ? "Files in every folder" : open ? open.name : "Your files";
    uploadFolder.textContent = open ? open.name : "the top level";
    document.title = `${open ? `${open.name} · ` : ""}Files · filehost`;
  }

  // The open folder's folders and the first page of its files as the view asks, in place of
  // the list.
  async function load(rows = PAGE_SIZE) {
    const mine = ++loads;
    paths = new Map();
    const [folders, files] = await Promise.all([
      view.everywhere ? [] : childrenOf(call, open ? open.id : null),
      call("GET", listQuery(view, rows, null)),
    ]);
    if (mine !== loads) {
      return;
    }
    foldersBody.replaceChildren(...matchingFolders(folders).map((folder) => folderRow(folder, folderActions)));
    nextCursor = typeof files.next_cursor === "string" ? files.next_cursor : null;
    draw(Array.isArray(files.files) ? files.files : [], false);
    more.hidden = nextCursor === null;
  }

  function emptied() {
    foldersBody.replaceChildren();
    draw([], false);
    table.hidden = true;
    tiles.hidden = true;
    empty.hidden = true;
    noMatch.hidden = true;
    more.hidden = true;
  }

  async function refresh(rows = PAGE_SIZE) {
    hide(listError);
    try {
      await load(rows);
    } catch (failure) {
      if (failure instanceof ApiError && failure.code === "folder_not_found" && open) {
        show(listError, `The folder ${open.name} no longer exists: it was deleted or moved away.`);
        emptied();
        return;
      }
      show(listError, failure instanceof ApiError ? describe(failure) : "Loading files failed.");
    } finally {
      loading.hidden = true;
    }
  }

  // The file the address names, previewed (a reload, a copied link).
  async function previewFromAddress() {
    const id = view.preview;
    if (!id) {
      return;
    }
    try {
      preview.open(shown.find((file) => file.id === id) || (await call("GET", `/files/${encodeURIComponent(id)}`)));
    } catch (failure) {
      view = { ...view, preview: null };
      address(false);
      show(pageError, failedText("Opening the preview", failure));
    }
  }

  // Makes the folder `id` (null: the top level) the open one; false when it cannot be read
  // (then the list says why).
  async function opened(id) {
    if (!id) {
      open = null;
      return true;
    }
    try {
      const folder = await call("GET", `/folders/${encodeURIComponent(id)}`);
      open = { id: folder.id, name: folder.name, path: Array.isArray(folder.path) ? folder.path : [] };
      return true;
    } catch (failure) {
      open = null;
      showFolder();
      emptied();
      loading.hidden = true;
      show(listError, failure instanceof ApiError && failure.code === "folder_not_found"
        ? "This folder does not exist, or was deleted. Go back to all files above."
        : failedText("Opening the folder", failure));
      return false;
    }
  }

  // Opens the folder `id` (null: the top level); `push` adds it to the history (a click, which
  // keeps the order, type and view but not the search), else the address already names it
  // (arrival, the back button).
  async function go(id, push) {
    if (push) {
      view = { ...view, folder: id, q: "", everywhere: false, preview: null };
      address(true);
      setControls(view);
      hide(pageStatus);
    }
    picked.clear();
    hide(pageError);
    hide(listError);
    opening = opened(id);
    if (!(await opening)) {
      return;
    }
    showFolder();
    await refresh();
    if (push) {
      listTitle.focus();
    }
  }

  onClick(byId("folder-create"), async () => {
    hide(pageStatus);
    // A folder asked for just after opening another goes where the address says, not where the
    // list was a moment before.
    await opening;
    const parent = open;
    askName({
      heading: parent ? `New folder in ${parent.name}` : "New folder",
      action: "Create folder",
      value: "",
      save: async (name) => {
        await newFolder(call, name, parent ? parent.id : null);
        return `Created the folder ${name}.`;
      },
    });
  });

  // The list's next page, below what it shows: whether it came.
  async function showMore() {
    if (nextCursor === null || more.disabled) {
      return false;
    }
    more.disabled = true;
    hide(listError);
    try {
      const data = await call("GET", listQuery(view, PAGE_SIZE, nextCursor));
      nextCursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
      draw(Array.isArray(data.files) ? data.files : [], true);
      more.hidden = nextCursor === null;
      return true;
    } catch (failure) {
      show(listError, failure instanceof ApiError ? describe(failure) : "Loading files failed.");
      return false;
    } finally {
      more.disabled = false;
    }
  }

  more.addEventListener("click", showMore);

  window.addEventListener("popstate", async () => {
    const dialog = byId("preview-dialog");
    view = readAddress();
    setControls(view);
    if (dialog.open) {
      dialog.close();
    }
    await go(view.folder, false);
    await previewFromAddress();
  });

  uploads(token, session.email, pageStatus, () => {
    refresh();
  }, async () => {
    // Files chosen just after opening a folder go where the address says, as a new folder does.
    await opening;
    return open ? { id: open.id, name: open.name } : { id: null, name: "the top level" };
  });
  setControls(view);
  go(view.folder, false).then(previewFromAddress);
}

const session = requireSession("Sign in to manage your files.");
if (session) {
  start(session);
}
