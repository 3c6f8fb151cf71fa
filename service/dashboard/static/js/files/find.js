// What the files page shows, as its address says: the open folder, a search by name (`q`), an
// order (`sort`), a type (`type`), the files of every folder instead of the open one's
// (`in=all`), the list or the gallery (`view`) and a file being previewed (`preview`), so that
// a reload, the back button and a copied link show the same. The search box asks the service
// (`GET /files?q=`) a moment after the typing stops, so a search reaches past the first page.

import { byId, el } from "../dom.js";
import { nameKey } from "../folders.js";

export const DEFAULT_SORT = "-created_at";
export const SORTS = [
  ["-created_at", "Newest first"],
  ["created_at", "Oldest first"],
  ["name", "Name, A to Z"],
  ["-name", "Name, Z to A"],
  ["-size", "Largest first"],
  ["size", "Smallest first"],
];
export const TYPES = [
  ["", "All types"],
  ["image", "Images"],
  ["video", "Videos"],
  ["audio", "Audio"],
  ["text", "Text"],
  ["pdf", "PDF"],
  ["other", "Other"],
];
const FOLDER_ID = /^fld_[0-9A-Za-z]{1,60}$/;
const FILE_ID = /^fil_[0-9A-Za-z]{1,60}$/;
export const MAX_QUERY = 100;
// How long the typing must pause before the search is sent: one request per word, not per key.
const DEBOUNCE_MS = 300;

// A name as the service compares it with a search (its search_form): case-folded as names
// compare, then without the accents of the Combining Diacritical Marks block, so "resume"
// finds "Résumé".
const ACCENTS = /[\u0300-\u036f]/g;
const searchForm = (text) => nameKey(text).normalize("NFD").replace(ACCENTS, "").normalize("NFC");

// Whether a name holds every word of a search, in any order, as the service finds files by it.
export function nameHolds(name, q) {
  const form = searchForm(name);
  return searchForm(q)
    .split(/\s+/)
    .every((word) => form.includes(word));
}

// The search as typed, or none for one of only spaces and accents, which looks for nothing
// (the service refuses it).
export function searchOf(text) {
  const q = text.trim().slice(0, MAX_QUERY);
  return searchForm(q).trim() ? q : "";
}

const known = (choices, value, fallback) => (choices.some(([key]) => key === value) ? value : fallback);

// The address's view: {folder, q, sort, type, everywhere, view, preview}, anything unknown as
// its default.
export function readAddress(search = window.location.search) {
  const query = new URLSearchParams(search);
  const folder = query.get("folder");
  const preview = query.get("preview");
  return {
    folder: folder && FOLDER_ID.test(folder) ? folder : null,
    q: searchOf(query.get("q") || ""),
    sort: known(SORTS, query.get("sort"), DEFAULT_SORT),
    type: known(TYPES, query.get("type") || "", ""),
    everywhere: query.get("in") === "all",
    view: query.get("view") === "gallery" ? "gallery" : "list",
    preview: preview && FILE_ID.test(preview) ? preview : null,
  };
}

// The address of a view: only what differs from the defaults is written.
export function addressOf(view) {
  const query = new URLSearchParams();
  if (view.folder) {
    query.set("folder", view.folder);
  }
  if (view.q) {
    query.set("q", view.q);
  }
  if (view.sort && view.sort !== DEFAULT_SORT) {
    query.set("sort", view.sort);
  }
  if (view.type) {
    query.set("type", view.type);
  }
  if (view.everywhere) {
    query.set("in", "all");
  }
  if (view.view === "gallery") {
    query.set("view", "gallery");
  }
  if (view.preview) {
    query.set("preview", view.preview);
  }
  const text = query.toString();
  return text ? `/files?${text}` : "/files";
}

// The `GET /files` query of a view, a page at a time: the open folder's files, or without a
// folder the account's, every folder's.
export function listQuery(view, limit, cursor) {
  const query = new URLSearchParams(view.everywhere ? { limit } : { folder_id: view.folder || "root", limit });
  if (view.q) {
    query.set("q", view.q);
  }
  if (view.sort !== DEFAULT_SORT) {
    query.set("sort", view.sort);
  }
  if (view.type) {
    query.set("type", view.type);
  }
  if (cursor) {
    query.set("cursor", cursor);
  }
  return `/files?${query}`;
}

// The search box, the order, the type, "In every folder" and the list/gallery switch.
// `changed(part, push)` is told what the person changed ({q} while typing, {sort}, {type},
// {everywhere}, {view}); `push` says whether it is a step the back button should return to (a
// choice) or not (each pause in the typing).
export function findControls(changed) {
  const search = byId("files-search");
  const sort = byId("files-sort");
  const type = byId("files-type");
  const everywhere = byId("files-everywhere");
  const listButton = byId("view-list");
  const galleryButton = byId("view-gallery");
  sort.replaceChildren(...SORTS.map(([value, text]) => el("option", { text, attrs: { value } })));
  type.replaceChildren(...TYPES.map(([value, text]) => el("option", { text, attrs: { value } })));
  let timer = null;
  const typed = () => searchOf(search.value);

  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => changed({ q: typed() }, false), DEBOUNCE_MS);
  });
  // Enter sends at once; the form is never submitted natively.
  byId("files-find").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    changed({ q: typed() }, false);
  });
  // A choice made while the typing has not paused yet takes the search as typed along.
  sort.addEventListener("change", () => changed({ sort: sort.value, q: typed() }, true));
  type.addEventListener("change", () => changed({ type: type.value, q: typed() }, true));
  everywhere.addEventListener("change", () => changed({ everywhere: everywhere.checked, q: typed() }, true));
  listButton.addEventListener("click", () => changed({ view: "list" }, true));
  galleryButton.addEventListener("click", () => changed({ view: "gallery" }, true));
  for (const control of [search, sort, type, everywhere, listButton, galleryButton]) {
    control.disabled = false;
  }

  // The controls as the view says (arrival, the back button).
  return (view) => {
    clearTimeout(timer);
    if (search.value.trim() !== view.q) {
      search.value = view.q;
    }
    sort.value = view.sort;
    type.value = view.type;
    everywhere.checked = view.everywhere;
    listButton.setAttribute("aria-pressed", String(view.view === "list"));
    galleryButton.setAttribute("aria-pressed", String(view.view === "gallery"));
  };
}
