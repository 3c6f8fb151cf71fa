// What the files page draws for the open folder: its breadcrumbs (the top level, the folders
// above it, then itself), and a row per folder inside it and per file, with their buttons.

import { size } from "../bytes.js";
import { el } from "../dom.js";
import { cell, rowButton } from "../table.js";
import { when } from "../time.js";

export const TOP = "All files";

// The address of a folder's view (null: the top level).
export function folderHref(id) {
  return id ? `/files?folder=${encodeURIComponent(id)}` : "/files";
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

// `actions`: {go(id), rename(folder, button), move(folder, button), remove(folder, button)}.
export function folderRow(folder, actions) {
  const buttons = ["Rename", "Move", "Delete"].map((text) => {
    const button = rowButton(text, text === "Delete" ? "danger" : "secondary", ` folder ${folder.name}`);
    button.addEventListener("click", () => actions[text === "Delete" ? "remove" : text.toLowerCase()](folder));
    return button;
  });
  const row = el("tr", { className: "is-folder" }, [
    cell("Name", "key-name folder-name", folderLink(folder.id, folder.name, actions.go)),
    cell("Size", "file-size", document.createTextNode("—")),
    cell("Type", "file-type", document.createTextNode("Folder")),
    cell("Uploaded", "file-uploaded", when(folder.created_at, "—")),
    cell("Actions", "key-actions", el("div", { className: "row-actions" }, buttons)),
  ]);
  row.dataset.folderId = folder.id;
  return row;
}

// `actions`: {download(file, button), share(file, button), rename(file), move(file),
// remove(file)}.
export function fileRow(file, actions) {
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
    cell("Name", "key-name file-name", document.createTextNode(file.name)),
    cell("Size", "file-size", el("span", { text: size(file.size), attrs: { title: `${file.size} bytes` } })),
    cell("Type", "file-type", el("code", { text: file.content_type })),
    cell("Uploaded", "file-uploaded", when(file.created_at, "—")),
    cell("Actions", "key-actions", el("div", { className: "row-actions" }, [save, share, rename, move, remove])),
  ]);
  row.dataset.fileId = file.id;
  return row;
}
