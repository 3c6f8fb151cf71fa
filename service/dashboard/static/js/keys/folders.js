// Which folders a key reaches, in the create and edit forms: the whole account (the default), or
// only the folders chosen, listed by their paths as a tree (a folder reaches everything below it,
// so a folder inside a chosen one adds nothing). And how the key list names them.

import { el } from "../dom.js";
import { folderTree } from "../folders.js";

export const MAX_KEY_FOLDERS = 50;

// `prefix` names the controls' ids ("create-folders" -> #create-folders-all, ...); `box` is the
// fieldset they go in, before `before` when given.
export function folderChoice(prefix, box, before = null) {
  const all = el("input", { attrs: { type: "radio", id: `${prefix}-all`, name: `${prefix}-scope`, value: "all" } });
  const some = el("input", { attrs: { type: "radio", id: `${prefix}-some`, name: `${prefix}-scope`, value: "some" } });
  const listId = `${prefix}-list`;
  const list = el("div", { className: "folder-list", attrs: { id: listId, role: "group", "aria-label": "Folders the key reaches" } });
  const note = el("p", { className: "hint", attrs: { id: `${prefix}-note` } });
  const parts = [
    el("label", { className: "check", attrs: { for: all.id } }, [
      all,
      el("span", { text: "All files and folders of the account" }),
    ]),
    el("label", { className: "check", attrs: { for: some.id } }, [
      some,
      el("span", {}, [
        "Only the folders chosen ",
        el("small", { text: "and everything in them; the top level and other folders answer “not found” to the key" }),
      ]),
    ]),
    list,
    note,
  ];
  for (const part of parts) {
    box.insertBefore(part, before);
  }
  let boxes = [];
  let known = []; // the folders listed, as folderTree gives them
  let loading = null; // while the folders are being listed: the ids the form opened with
  let loads = 0; // the latest load: an older one that ends later is dropped

  function sync() {
    list.hidden = !some.checked;
    note.hidden = !some.checked || !note.textContent;
  }
  let caller = null; // the page's API call, once the form has opened
  let listed = false; // whether the list shows the account's folders as of this opening
  all.addEventListener("change", sync);
  some.addEventListener("change", () => {
    sync();
    if (!listed && caller) {
      listFolders(caller, []);
    }
  });

  // The form opened on `chosen` (ids, or null for the whole account): the folders are listed
  // now when some are chosen, else only once "Only the folders chosen" is.
  function load(call, chosen) {
    caller = call;
    listed = false;
    all.checked = !Array.isArray(chosen);
    some.checked = Array.isArray(chosen);
    boxes = [];
    loading = null;
    note.textContent = "";
    list.replaceChildren();
    sync();
    if (Array.isArray(chosen)) {
      return listFolders(call, chosen);
    }
    return Promise.resolve();
  }

  // Lists the account's folders, `chosen` checked.
  async function listFolders(call, chosen) {
    listed = true;
    list.replaceChildren(el("p", { className: "hint", text: "Loading your folders…" }));
    note.textContent = "";
    sync();
    const picked = new Set(Array.isArray(chosen) ? chosen : []);
    boxes = [];
    loading = [...picked];
    const mine = ++loads;
    let tree;
    try {
      tree = await folderTree(call);
    } catch {
      tree = { folders: [], cut: false, failed: true };
    }
    if (mine !== loads) {
      return;
    }
    if (tree.failed) {
      note.textContent = "Your folders could not be listed: try opening the form again.";
    }
    known = tree.folders;
    // A folder the key names that was not listed (beyond what a list shows) stays chosen.
    const missing = [...picked].filter((id) => !known.some((folder) => folder.id === id));
    const items = [...known, ...missing.map((id) => ({ id, path: `Folder ${id}`, depth: 0 }))];
    boxes = items.map((folder) => {
      const id = `${prefix}-folder-${folder.id}`;
      const input = el("input", { attrs: { type: "checkbox", id, value: folder.id } });
      input.checked = picked.has(folder.id);
      // Indented by its depth, as a tree: the path says where it is in words.
      const depth = `depth-${Math.min(folder.depth || 0, 8)}`;
      el("label", { className: `check ${depth}`, attrs: { for: id } }, [input, el("span", { text: folder.path })]);
      return input;
    });
    list.replaceChildren(...boxes.map((input) => input.parentElement));
    if (!items.length) {
      list.replaceChildren(el("p", { className: "hint", text: "No folders yet: create some on the Files page." }));
    }
    if (tree.cut) {
      note.textContent = "Only the first folders are listed.";
    }
    loading = null;
    sync();
  }

  // null for the whole account, else the chosen folders' ids in the listed order.
  function value() {
    if (all.checked) {
      return null;
    }
    return loading ? [...loading] : boxes.filter((input) => input.checked).map((input) => input.value);
  }

  // Why the choice cannot be sent, or null.
  function problem() {
    const chosen = value();
    if (chosen === null) {
      return null;
    }
    if (chosen.length === 0) {
      return "Choose at least one folder, or all files and folders.";
    }
    if (chosen.length > MAX_KEY_FOLDERS) {
      return `Choose at most ${MAX_KEY_FOLDERS} folders.`;
    }
    return null;
  }

  function focus() {
    (all.checked ? all : boxes[0] || some).focus();
  }

  return { load, value, problem, focus, controls: () => [some, ...boxes], pathOf: (id) => pathIn(known, id) };
}

function pathIn(folders, id) {
  const found = folders.find((folder) => folder.id === id);
  return found ? found.path : null;
}

// The key list's cell: "All" or the folders' paths (an id when its folder is not known here).
export function foldersNode(key, folders) {
  if (!Array.isArray(key.folder_ids)) {
    return document.createTextNode("All");
  }
  if (!key.folder_ids.length) {
    return el("span", { className: "badge is-off", text: "None: refused everything" });
  }
  return el(
    "ul",
    { className: "folder-paths", attrs: { "aria-label": "Folders" } },
    key.folder_ids.map((id) => el("li", { text: pathIn(folders, id) || id })),
  );
}
