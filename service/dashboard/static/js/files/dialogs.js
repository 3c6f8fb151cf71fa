// The files page's dialogs for folders and files: a name (a new folder, or a new name for a
// folder or a file), where to move one to, and deleting a folder after saying what goes with it.
// Each checks what it can before sending, and keeps the service's refusal in the dialog, with
// what was typed, for another try or Cancel.

import { ApiError, describe } from "../api.js";
import { byId, confirmation, hide, show, whenClosed } from "../dom.js";
import { el } from "../dom.js";
import { childrenOf, folderNameProblem } from "../folders.js";
import { plural } from "./bulk.js";

function why(failure, what) {
  return failure instanceof ApiError ? describe(failure) : `${what} failed.`;
}

// A dialog around a form: `open({..., run})` shows it; submitting calls `run(report)`, which
// closes the dialog when done or calls `report(text)` to say what went wrong. Closed without a
// change (Cancel, Escape), the focus goes back to what opened it.
function formDialog(prefix) {
  const dialog = byId(`${prefix}-dialog`);
  const form = byId(`${prefix}-form`);
  const error = byId(`${prefix}-error`);
  const submit = byId(`${prefix}-submit`);
  let pending = null;
  let opener = null;

  byId(`${prefix}-cancel`).addEventListener("click", () => dialog.close("cancel"));
  whenClosed(dialog, () => {
    pending = null;
    if (dialog.returnValue !== "done" && opener && opener.isConnected) {
      opener.focus();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const run = pending;
    if (!run) {
      return;
    }
    hide(error);
    submit.disabled = true;
    await run((text) => {
      show(error, text);
      submit.disabled = false;
    });
  });

  return {
    open(run, focus) {
      pending = run;
      opener = document.activeElement;
      hide(error);
      submit.disabled = false;
      dialog.returnValue = "";
      dialog.showModal();
      focus.focus();
    },
    done() {
      dialog.close("done");
    },
    submit,
  };
}

// `open({title, action, value, save(name)})`: asks for a name, checked by the service's rules,
// then `save(name)` (the trimmed name) makes the change and returns what to say, or throws.
export function nameDialog(afterwards) {
  const asked = formDialog("name");
  const title = byId("name-title");
  const input = byId("name-input");

  return ({ heading, action, value, save }) => {
    title.textContent = heading;
    asked.submit.textContent = action;
    input.value = value || "";
    input.removeAttribute("aria-invalid");
    asked.open(async (report) => {
      const problem = folderNameProblem(input.value);
      if (problem) {
        input.setAttribute("aria-invalid", "true");
        report(`The name ${problem}.`);
        input.focus();
        return;
      }
      input.removeAttribute("aria-invalid");
      let said;
      try {
        said = await save(input.value.trim());
      } catch (failure) {
        report(why(failure, action));
        return;
      }
      asked.done();
      await afterwards(said);
    }, input);
    input.select();
  };
}

// `open({what, choices: [{value, text}], current, save(value), already})`: asks where to move
// `what` (value "" is the top level; `already`: what to say when it is chosen where it is), then
// `save(value)` moves it and returns what to say, or throws.
export function moveDialog(afterwards) {
  const asked = formDialog("move");
  const name = byId("move-name");
  const target = byId("move-target");

  return ({ what, choices, current, save, already }) => {
    name.textContent = what;
    target.replaceChildren(
      ...choices.map((choice) => el("option", { text: choice.text, attrs: { value: choice.value } })),
    );
    target.value = current;
    asked.open(async (report) => {
      if (target.value === current) {
        report(already || `${what} is already there: choose another folder.`);
        return;
      }
      let said;
      try {
        said = await save(target.value);
      } catch (failure) {
        report(why(failure, "Moving"));
        return;
      }
      asked.done();
      await afterwards(said);
    }, target);
  };
}

// What the folder `id` holds, all the way down: {folders, files, more} (more: true when there
// was more than was counted).
async function contents(call, id) {
  const counted = { folders: 0, files: 0, more: false };
  const waiting = [id];
  while (waiting.length) {
    if (counted.folders > 500) {
      counted.more = true;
      break;
    }
    const folderId = waiting.shift();
    const inside = await childrenOf(call, folderId);
    counted.folders += inside.length;
    waiting.push(...inside.map((folder) => folder.id));
    let cursor = null;
    do {
      const query = new URLSearchParams(cursor ? { folder_id: folderId, limit: "1000", cursor } : { folder_id: folderId, limit: "1000" });
      const data = await call("GET", `/files?${query}`);
      counted.files += Array.isArray(data.files) ? data.files.length : 0;
      cursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
    } while (cursor);
  }
  return counted;
}

// What a folder holds, naming only what it has: "1 file", "2 folders and 3 files".
function holding(counted) {
  const parts = [];
  if (counted.folders) {
    parts.push(plural(counted.folders, "folder", "folders"));
  }
  if (counted.files) {
    parts.push(plural(counted.files, "file", "files"));
  }
  return parts.join(" and ");
}

// `open(folder)`: says what deleting the folder removes (counted first), and deletes it with
// everything in it once confirmed. `afterwards(said)` shows the list as it now is.
export function folderDeleteDialog(call, afterwards, failed) {
  const dialog = byId("folder-delete-dialog");
  const name = byId("folder-delete-name");
  const description = byId("folder-delete-description");
  const asked = confirmation({
    dialog,
    cancel: byId("folder-delete-cancel"),
    confirm: byId("folder-delete-confirm"),
    error: byId("folder-delete-error"),
  });

  return async (folder) => {
    let counted;
    try {
      counted = await contents(call, folder.id);
    } catch (failure) {
      failed(`Reading what ${folder.name} holds failed: ${why(failure, "Reading")}`);
      return;
    }
    const empty = counted.folders === 0 && counted.files === 0;
    name.textContent = folder.name;
    description.textContent = empty
      ? "The folder is empty. Keys bound to it lose it. This cannot be undone."
      : `This also deletes everything in it: ${counted.more ? "at least " : ""}` +
        `${holding(counted)}, ` +
        "for good, and keys bound to it lose it. This cannot be undone.";
    asked.open(async (report) => {
      const query = empty ? "" : "?recursive=true";
      try {
        await call("DELETE", `/folders/${encodeURIComponent(folder.id)}${query}`);
      } catch (failure) {
        if (failure instanceof ApiError && failure.code === "folder_not_empty") {
          report("Something was put in the folder meanwhile: cancel and look again before deleting.");
          return;
        }
        if (!(failure instanceof ApiError && failure.code === "folder_not_found")) {
          report(why(failure, "Deleting"));
          return;
        }
        asked.close("gone");
        await afterwards(failure.message);
        return;
      }
      asked.close("deleted");
      await afterwards(
        empty ? `Deleted the folder ${folder.name}.` : `Deleted the folder ${folder.name} and everything in it.`,
      );
    });
  };
}
