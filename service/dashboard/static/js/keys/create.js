// Creating a key, in a dialog opened by "Create key": a name, the permissions (drawn from
// permissions.js), an expiry and the folders it reaches (all, or those chosen). The new key's secret goes to the secret panel once the dialog
// has closed; a refusal stays in the dialog with what was typed.

import { ApiError, describe } from "../api.js";
import { byId, hide, onClick, show, whenClosed } from "../dom.js";
import { permissionGrid, revealChecked } from "../permissions.js";
import { folderChoice } from "./folders.js";
import { nameProblem } from "./rules.js";

// `keys`: {call, pageStatus, secret, list}.
export function createDialog(keys) {
  const dialog = byId("create-dialog");
  const opener = byId("create-open");
  const form = byId("create-form");
  const error = byId("create-error");
  const submit = byId("create-submit");
  const nameInput = byId("key-name");
  const expiry = byId("key-expiry");
  const grid = permissionGrid("perm-", "permissions");
  byId("create-permissions").append(grid);
  const folderProblem = byId("create-folders-problem");
  const folders = folderChoice("create-folders", byId("create-folders"), folderProblem);

  function refuse(text, field) {
    show(error, text);
    field.focus();
  }

  onClick(opener, () => {
    form.reset();
    revealChecked(grid); // a fresh form: nothing chosen, the later permissions folded away
    hide(error);
    hide(folderProblem);
    hide(keys.pageStatus);
    submit.disabled = false;
    dialog.returnValue = "";
    dialog.showModal();
    nameInput.focus();
    folders.load(keys.call, null);
  });
  byId("create-cancel").addEventListener("click", () => dialog.close("cancel"));
  // Closed by Cancel or Escape: back to the button that opened it. Created: the secret panel
  // takes the focus instead.
  whenClosed(dialog, () => {
    if (dialog.returnValue !== "created") {
      opener.focus();
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    hide(error);
    const problem = nameProblem(nameInput.value);
    const permissions = Array.from(
      form.querySelectorAll('input[name="permissions"]:checked'),
      (box) => box.value,
    );
    if (problem) {
      refuse(`The name ${problem}.`, nameInput);
      return;
    }
    if (permissions.length === 0) {
      refuse("Choose at least one permission.", form.querySelector('input[name="permissions"]'));
      return;
    }
    hide(folderProblem);
    const folderTrouble = folders.problem();
    if (folderTrouble) {
      show(folderProblem, folderTrouble);
      refuse(`The folders: ${folderTrouble}`, { focus: () => folders.focus() });
      return;
    }
    const chosen = folders.value();
    submit.disabled = true;
    try {
      const created = await keys.call("POST", "/keys", {
        name: nameInput.value.trim(),
        permissions,
        expires_days: Number(expiry.value),
        ...(chosen === null ? {} : { folder_ids: chosen }),
      });
      dialog.close("created");
      keys.secret.show(created, false);
      await keys.list.refresh();
    } catch (failure) {
      if (failure instanceof ApiError && failure.code === "folder_not_found") {
        // Deleted since the form listed it: the list as it is now, to choose again.
        show(error, `Creating the key failed: ${failure.message} A folder chosen was deleted meanwhile.`);
        show(folderProblem, "A folder chosen no longer exists: choose again from the folders as they are now.");
        folders.load(keys.call, []);
        return;
      }
      show(error, failure instanceof ApiError ? describe(failure) : "Creating the key failed.");
      error.scrollIntoView({ block: "nearest" });
    } finally {
      submit.disabled = false;
    }
  });

  return { dialog, focus: () => opener.focus() };
}
