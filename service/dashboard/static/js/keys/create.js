// The form that creates a key: a name, the permissions (drawn from permissions.js) and an
// expiry. The new key's secret goes to the secret panel.

import { ApiError, describe } from "../api.js";
import { byId, hide, show } from "../dom.js";
import { permissionGrid } from "../permissions.js";

// `keys`: {call, pageStatus, secret, list}.
export function createForm(keys) {
  const form = byId("create-form");
  const error = byId("create-error");
  const submit = byId("create-submit");
  const nameInput = byId("key-name");
  const expiry = byId("key-expiry");
  byId("create-permissions").append(permissionGrid("perm-", "permissions"));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    hide(error);
    hide(keys.pageStatus);
    const name = nameInput.value.trim();
    const permissions = Array.from(
      form.querySelectorAll('input[name="permissions"]:checked'),
      (box) => box.value,
    );
    if (!name) {
      show(error, "Give the key a name.");
      nameInput.focus();
      return;
    }
    if (permissions.length === 0) {
      show(error, "Choose at least one permission.");
      form.querySelector('input[name="permissions"]').focus();
      return;
    }
    submit.disabled = true;
    try {
      const created = await keys.call("POST", "/keys", {
        name,
        permissions,
        expires_days: Number(expiry.value),
      });
      form.reset();
      keys.secret.show(created, false);
      await keys.list.refresh();
    } catch (failure) {
      show(error, failure instanceof ApiError ? describe(failure) : "Creating the key failed.");
      error.scrollIntoView({ block: "nearest" });
    } finally {
      submit.disabled = false;
    }
  });

  return { focus: () => nameInput.focus() };
}
