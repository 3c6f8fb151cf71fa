// Revoke a key, for good, after the dialog's confirmation.

import { ApiError, describe } from "../api.js";
import { byId, confirmation } from "../dom.js";

// `keys`: {call, keyPath, announce, listTitle, list, edit}.
export function revokeDialog(keys) {
  const dialog = byId("revoke-dialog");
  const name = byId("revoke-name");
  const prefix = byId("revoke-prefix");
  const asked = confirmation({
    dialog,
    cancel: byId("revoke-cancel"),
    confirm: byId("revoke-confirm"),
    error: byId("revoke-error"),
  });

  async function revoke(key, report) {
    try {
      await keys.call("DELETE", keys.keyPath(key));
      dialog.close("revoked");
      keys.announce(`Revoked the key ${key.name}. It no longer works.`);
    } catch (failure) {
      if (!(failure instanceof ApiError && failure.code === "key_not_found")) {
        report(failure instanceof ApiError ? describe(failure) : "Revoking failed.");
        return;
      }
      dialog.close("gone");
      keys.announce(failure.message);
    }
    if (keys.edit.isEditing(key)) {
      keys.edit.close();
    }
    await keys.list.refresh();
    keys.listTitle.focus();
  }

  function open(key) {
    name.textContent = key.name;
    prefix.textContent = key.key_prefix;
    asked.open((report) => revoke(key, report));
  }

  return { open, dialog };
}
