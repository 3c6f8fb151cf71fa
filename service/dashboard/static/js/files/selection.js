// Choosing many files at once: a checkbox per row and per tile, a click with Shift choosing (or
// leaving) every file between it and the one clicked before, and "Select all in view". The bar
// above the list says how many are chosen and holds what can be done with them.

import { byId, el } from "../dom.js";

// `files()`: the files in view, in order; `changed(count)` after every change.
export function selection(files, changed) {
  const chosen = new Map(); // id -> file
  const all = byId("select-all");
  let anchor = null; // the id of the file clicked last, where a Shift+click's range starts

  // Only files in view stay chosen: one moved, deleted or filtered away is no longer there to act on.
  function sync() {
    const inView = files();
    const here = new Set(inView.map((file) => file.id));
    for (const id of [...chosen.keys()]) {
      if (!here.has(id)) {
        chosen.delete(id);
      }
    }
    for (const box of document.querySelectorAll("input[data-select]")) {
      box.checked = chosen.has(box.dataset.select);
    }
    const count = chosen.size;
    all.checked = inView.length > 0 && count === inView.length;
    all.indeterminate = count > 0 && count < inView.length;
    all.disabled = inView.length === 0;
    changed(chosen.size);
  }

  function set(file, on) {
    if (on) {
      chosen.set(file.id, file);
    } else {
      chosen.delete(file.id);
    }
  }

  function clicked(file, on, extend) {
    const inView = files();
    const from = extend && anchor ? inView.findIndex((other) => other.id === anchor) : -1;
    const to = inView.findIndex((other) => other.id === file.id);
    if (from >= 0 && to >= 0) {
      for (let at = Math.min(from, to); at <= Math.max(from, to); at += 1) {
        set(inView[at], on);
      }
    } else {
      set(file, on);
    }
    anchor = file.id;
    sync();
  }

  all.addEventListener("change", () => {
    for (const file of files()) {
      set(file, all.checked);
    }
    sync();
  });

  return {
    // A file's checkbox, labelled with its name for a screen reader.
    checkbox(file) {
      const box = el("input", { attrs: { type: "checkbox", "data-select": file.id } });
      box.checked = chosen.has(file.id);
      box.addEventListener("click", (event) => clicked(file, box.checked, event.shiftKey));
      return el("label", { className: "select-box" }, [
        box,
        el("span", { className: "visually-hidden", text: `Select ${file.name}` }),
      ]);
    },
    chosen() {
      return [...chosen.values()];
    },
    clear() {
      chosen.clear();
      anchor = null;
      sync();
    },
    // After the list changed (more loaded, a tile view): the boxes and the count as they are.
    sync,
  };
}
