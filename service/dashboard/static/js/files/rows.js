// What the files page draws for the open folder: its breadcrumbs (the top level, the folders
// above it, then itself), and a row per folder inside it and per file, with their buttons.

import { size } from "../bytes.js";
import { el } from "../dom.js";
import { cell, rowButton } from "../table.js";
import { when } from "../time.js";
import { addressOf } from "./find.js";

export const TOP = "All files";

// The address of a folder's view (null: the top level), keeping the order, type and view of the
// one shown (`keep`), not its search.
export function folderHref(id, keep = {}) {
  return addressOf({ ...keep, q: "", preview: null, folder: id });
}

// A link that opens a folder in the page (`go(id)`), and is a plain link to it otherwise (a new
// tab, a copied address).
function folderLink(id, text, go) {
  const link = el("a", { text, attrs: { href: folderHref(id) } });
  link.addEventListener("click", (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
      return;
    }
    event.preventDefault();
    go(id);
  });
  return link;
}

// `folder`: null at the top level, else {id, name, path: [{id, name}] of the folders above it}.
export function breadcrumbs(list, folder, go) {
  const items = [];
  const here = (text) => el("li", {}, [el("span", { text, attrs: { "aria-current": "page" } })]);
  if (!folder) {
    items.push(here(TOP));
  } else {
    items.push(el("li", {}, [folderLink(null, TOP, go)]));
    for (const above of folder.path || []) {
      items.push(el("li", {}, [folderLink(above.id, above.name, go)]));
    }
    items.push(here(folder.name));
  }
  list.replaceChildren(...items);
}

// `actions`: {go(id), archive(folder, button), rename(folder, button), move(folder, button),
// remove(folder, button)}.
export function folderRow(folder, actions) {
  const buttons = ["Download as ZIP", "Share", "Rename", "Move", "Delete"].map((text) => {
    const button = rowButton(text, text === "Delete" ? "danger" : "secondary", ` folder ${folder.name}`);
    const action = { "Download as ZIP": "archive", Delete: "remove" }[text] || text.toLowerCase();
    button.addEventListener("click", () => actions[action](folder, button));
    return button;
  });
  const row = el("tr", { className: "is-folder" }, [
    cell("Select", "file-select", []),
    cell("Name", "key-name folder-name", folderLink(folder.id, folder.name, actions.go)),
    cell("Size", "file-size", document.createTextNode("—")),
    cell("Type", "file-type", document.createTextNode("Folder")),
    cell("Uploaded", "file-uploaded", when(folder.created_at, "—")),
    cell("Actions", "key-actions", el("div", { className: "row-actions" }, buttons)),
  ]);
  row.dataset.folderId = folder.id;
  return row;
}

// A link that previews the file in the page (`open(file)`); its address names the preview too
// (`href(file)`), so a new tab or a copied link opens the page with it shown.
export function fileLink(file, href, open) {
  const link = el("a", { text: file.name, attrs: { href: href(file) } });
  link.dataset.preview = file.id;
  link.addEventListener("click", (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
      return;
    }
    event.preventDefault();
    open(file);
  });
  return link;
}

// Where a file is, for a list of every folder's files: "in Photos / 2024", a link that opens the
// folder (`go(id)`), its path filled in once `path` (a promise of it) answers.
export function fileWhere(file, path, go) {
  if (!file.folder_id) {
    return el("span", { className: "hint file-where", text: "in the top level" });
  }
  const link = folderLink(file.folder_id, "a folder", go);
  path.then((text) => {
    link.textContent = text;
  }, () => {});
  return el("span", { className: "hint file-where" }, ["in ", link]);
}

// `actions`: {download(file, button), share(file, button), rename(file), move(file),
// remove(file)}; `link`: the file's name as a link that previews it; `checkbox`: its selection;
// `where`: where the file is (`fileWhere`), in a list of every folder's files.
export function fileRow(file, actions, link, checkbox, where = null) {
  const save = rowButton("Download", "secondary", ` ${file.name}`);
  save.addEventListener("click", () => actions.download(file, save));
  const share = rowButton("Share", "secondary", ` ${file.name}`);
  share.addEventListener("click", () => actions.share(file, share));
  const rename = rowButton("Rename", "secondary", ` ${file.name}`);
  rename.addEventListener("click", () => actions.rename(file));
  const move = rowButton("Move", "secondary", ` ${file.name}`);
  move.addEventListener("click", () => actions.move(file));
  const remove = rowButton("Delete", "danger", ` ${file.name}`);
  remove.addEventListener("click", () => actions.remove(file));
  const row = el("tr", {}, [
    cell("Select", "file-select", checkbox),
    cell("Name", "key-name file-name", where ? el("span", {}, [link, el("br"), where]) : link),
    cell("Size", "file-size", el("span", { text: size(file.size), attrs: { title: `${file.size} bytes` } })),
    cell("Type", "file-type", el("code", { text: file.content_type })),
    cell("Uploaded", "file-uploaded", when(file.created_at, "—")),
    cell("Actions", "key-actions", el("div", { className: "row-actions" }, [save, share, rename, move, remove])),
  ]);
  row.dataset.fileId = file.id;
  return row;
}
