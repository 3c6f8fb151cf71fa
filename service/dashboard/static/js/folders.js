// The account's folders as the pages need them: every folder with its path ("Projects / 2025"),
// for the lists that choose a folder (the key forms, the default folder, where to move to), and
// the rules of a folder's name, checked before anything is sent.

import { pyStrip, length } from "./keys/rules.js";

export const MAX_FOLDER_NAME = 255;
// How many folders a choice lists at most: an account's limit is 10,000, far more than a list
// can usefully show; past this the list says it is cut.
const MOST = 2000;
const CONTROL = /[\x00-\x1f\x7f-\x9f]/;

// Why a folder's (or a file's new) name is refused ("must not be empty"), or null: the
// service's rules (docs/api.md, Folders).
export function folderNameProblem(text) {
  const name = pyStrip(text);
  if (!name) {
    return "must not be empty";
  }
  if (length(name) > MAX_FOLDER_NAME) {
    return `must be at most ${MAX_FOLDER_NAME} characters`;
  }
  if (CONTROL.test(name)) {
    return "must not contain control characters";
  }
  if (name.includes("/") || name.includes("\\")) {
    return "must not contain / or \\";
  }
  if (name === "." || name === "..") {
    return "must not be . or ..";
  }
  return null;
}

// How a name compares with its siblings' in the service (its name_key): fully case-folded (upper
// then lower case folds as full case folding does, ß as ss; a final sigma as any sigma) in
// Unicode NFC, so "Straße" and "STRASSE" are one name.
export function nameKey(name) {
  return name.normalize("NFC").toUpperCase().toLowerCase().replaceAll("ς", "σ").normalize("NFC");
}

// A new folder named `name` in the folder `parentId` (null: the top level), as the service
// answers it.
export function newFolder(call, name, parentId) {
  return call("POST", "/folders", parentId ? { name, parent_id: parentId } : { name });
}

// One folder's children, every page of them, by name.
export async function childrenOf(call, parentId) {
  const found = [];
  let cursor = null;
  do {
    const query = new URLSearchParams(parentId ? { limit: "1000", parent_id: parentId } : { limit: "1000" });
    if (cursor) {
      query.set("cursor", cursor);
    }
    const data = await call("GET", `/folders?${query}`);
    found.push(...(Array.isArray(data.folders) ? data.folders : []));
    cursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
  } while (cursor);
  return found;
}

// Every folder of the account, depth first and by name within a folder, each with `depth` (0
// at the top level) and `path`, its names from the top joined by " / ". {folders, cut}: cut is
// true when there were more than a list shows.
export async function folderTree(call) {
  const folders = [];
  async function walk(parentId, depth, above) {
    for (const folder of await childrenOf(call, parentId)) {
      if (folders.length >= MOST) {
        return true;
      }
      const path = above ? `${above} / ${folder.name}` : folder.name;
      folders.push({ ...folder, depth, path });
      if (await walk(folder.id, depth + 1, path)) {
        return true;
      }
    }
    return false;
  }
  const cut = await walk(null, 0, "");
  return { folders, cut };
}

// The path of the folder `id` among `folders` (as folderTree gives them), or the id itself when
// it is not among them (deleted meanwhile, or beyond what was listed).
export function pathOf(folders, id) {
  const found = folders.find((folder) => folder.id === id);
  return found ? found.path : id;
}
