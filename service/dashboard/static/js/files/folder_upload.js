// A folder uploaded whole (chosen with "Choose a folder", or dropped): its files, each with the
// folders it sits in, and those folders made below the open one as they are first needed. A
// folder of the same name already there (names compare as the service compares them,
// `nameKey`) is used as it is, as copying into it would, so uploading a folder twice makes no
// second folder.

import { childrenOf, nameKey, newFolder } from "../folders.js";

// Files an operating system keeps in folders for itself: Finder's .DS_Store and "._" twins (its
// AppleDouble files on a disk from elsewhere), Windows' Thumbs.db and desktop.ini, the Icon\r of
// a folder's custom icon. A folder upload leaves them out, as sync clients do; a file chosen by
// itself goes up whatever its name.
const SYSTEM_FILES = new Set([".ds_store", "thumbs.db", "ehthumbs.db", "desktop.ini", "icon\r"]);

// `chosen` ({file, folders}, as `chosenFiles` gives) split into what goes up and the names of
// the system files left out of its folders.
export function withoutSystemFiles(chosen) {
  const kept = [];
  const left = new Set();
  for (const item of chosen) {
    const name = item.file.name.toLowerCase();
    if (item.folders.length && (SYSTEM_FILES.has(name) || name.startsWith("._"))) {
      left.add(item.file.name.replace(/[\u0000-\u001f]/g, "")); // "Icon\r" said as "Icon"
    } else {
      kept.push(item);
    }
  }
  return { kept, left: [...left] };
}

// The files of a folder picker's choice, {file, folders}: the names of the folders each sits in,
// from its path in the choice ("Photos/2024/a.jpg"); none for a file chosen by itself.
export function chosenFiles(fileList) {
  return Array.from(fileList || [], (file) => {
    const parts = (file.webkitRelativePath || "").split("/").filter(Boolean);
    return { file, folders: parts.slice(0, -1) };
  });
}

// The files of a drop, as `chosenFiles`. A dropped folder is read through its entries, which the
// browser gives only while the drop event is handled: they are all taken before the first wait.
export async function droppedFiles(dataTransfer) {
  const entries = Array.from(dataTransfer.items || [], (item) =>
    item.kind === "file" && item.webkitGetAsEntry ? item.webkitGetAsEntry() : null,
  );
  if (!entries.some((entry) => entry && entry.isDirectory)) {
    return chosenFiles(dataTransfer.files);
  }
  const found = [];
  for (const entry of entries) {
    if (entry) {
      await collect(entry, [], found);
    }
  }
  return found;
}

async function collect(entry, folders, found) {
  if (entry.isFile) {
    const file = await new Promise((resolve, reject) => entry.file(resolve, reject));
    found.push({ file, folders });
    return;
  }
  const reader = entry.createReader();
  const inside = [...folders, entry.name];
  for (;;) {
    // A folder's entries come a batch at a time, until an empty one.
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (!batch.length) {
      return;
    }
    for (const child of batch) {
      await collect(child, inside, found);
    }
  }
}

// Where a file with `folders` goes, {id, name}, below `top` (the open folder, {id, name}; id null
// for the top level): each folder of the path made once, the first time a file needs it.
export function folderMaker(call, top) {
  const made = new Map();
  function at(folders) {
    if (!folders.length) {
      return Promise.resolve(top);
    }
    const key = JSON.stringify(folders);
    if (!made.has(key)) {
      const name = folders[folders.length - 1];
      made.set(key, at(folders.slice(0, -1)).then((parent) => folderIn(call, parent, name)));
    }
    return made.get(key);
  }
  return at;
}

async function folderIn(call, parent, name) {
  let folder;
  try {
    folder = await newFolder(call, name, parent.id);
  } catch (failure) {
    if (failure.code !== "folder_name_taken") {
      throw failure;
    }
    const wanted = nameKey(name);
    folder = (await childrenOf(call, parent.id)).find((child) => nameKey(child.name) === wanted);
    if (!folder) {
      throw failure;
    }
  }
  return { id: folder.id, name: parent.id ? `${parent.name} / ${folder.name}` : folder.name };
}
