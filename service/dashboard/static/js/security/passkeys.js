// Passkeys on the security page: the account's list, a new one added through the browser's
// WebAuthn prompt, and one removed behind a confirmation.

import { ApiError, failedText } from "../api.js";
import { byId, el, hide, show } from "../dom.js";
import { length } from "../keys/rules.js";
import { cell, rowButton } from "../table.js";
import { when } from "../time.js";
import { createPasskey, passkeysSupported, promptFailedText } from "../webauthn.js";

// The service's bound on a passkey's name, in characters as it counts them (code points).
const MAX_PASSKEY_NAME = 100;

function passkeyRow(item, remove) {
  const button = rowButton("Remove", "danger", ` passkey ${item.name}`);
  button.dataset.passkeyId = item.id;
  button.addEventListener("click", () => remove(item));
  const row = el("tr", {}, [
    cell("Name", "key-name passkey-name", el("span", { text: item.name })),
    cell("Added", "passkey-created", when(item.created_at, "—")),
    cell("Last used", "passkey-last-used", when(item.last_used_at, "never")),
    cell("Actions", "key-actions", button),
  ]);
  row.dataset.passkeyId = item.id;
  return row;
}

export function passkeysSection({ call, ask, done }) {
  const unavailable = byId("passkeys-unavailable");
  const empty = byId("passkeys-empty");
  const table = byId("passkeys-table");
  const tbody = byId("passkeys-body");
  const form = byId("passkey-form");
  const name = byId("passkey-name");
  const add = byId("passkey-add");
  const error = byId("passkey-error");

  function remove(item) {
    ask(
      {
        title: `Remove the passkey “${item.name}”?`,
        description:
          "It can no longer be used to sign in. If it was your last second factor, your recovery codes stop working too. Your other sessions are signed out.",
        confirmText: "Remove passkey",
      },
      async () => {
        try {
          const data = await call("DELETE", `/auth/mfa/webauthn/${encodeURIComponent(item.id)}`);
          return `Removed the passkey “${item.name}”. Other sessions ended: ${data.sessions_ended || 0}.`;
        } catch (failure) {
          if (failure instanceof ApiError && failure.code === "passkey_not_found") {
            return failure.message;
          }
          throw failure;
        }
      },
      "Removing the passkey",
    );
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    hide(error);
    name.removeAttribute("aria-invalid");
    const chosen = name.value.trim();
    let problem = null;
    if (!chosen) {
      problem = "Name the passkey first, so you can tell it apart later.";
    } else if (length(chosen) > MAX_PASSKEY_NAME) {
      problem = `The name must be at most ${MAX_PASSKEY_NAME} characters.`;
    }
    if (problem) {
      show(error, problem);
      name.setAttribute("aria-invalid", "true");
      name.focus();
      return;
    }
    add.disabled = true;
    try {
      const options = await call("POST", "/auth/mfa/webauthn/options");
      let credential;
      try {
        credential = await createPasskey(options);
      } catch (prompt) {
        show(error, promptFailedText(prompt));
        return;
      }
      const data = await call("POST", "/auth/mfa/webauthn", { name: chosen, credential });
      name.value = "";
      await done(`Added the passkey “${data.name}”: signing in can now use it. Other sessions ended: ${data.sessions_ended || 0}.`);
    } catch (failure) {
      show(error, failedText("Adding the passkey", failure));
    } finally {
      add.disabled = false;
    }
  });

  return {
    render(mfa) {
      const passkeys = Array.isArray(mfa.webauthn) ? mfa.webauthn : [];
      const available = Boolean(mfa.available && mfa.available.webauthn);
      tbody.replaceChildren(...passkeys.map((item) => passkeyRow(item, remove)));
      table.hidden = passkeys.length === 0;
      empty.hidden = passkeys.length > 0 || !available;
      if (!available) {
        show(
          unavailable,
          "Passkeys need the address people reach this service at: its operator sets FILEHOST_PUBLIC_URL. " +
            "(On the server's own machine, they work at http://localhost.)",
        );
      } else if (!passkeysSupported()) {
        show(unavailable, "This browser can't use passkeys here.");
      } else {
        hide(unavailable);
      }
      form.hidden = !available || !passkeysSupported();
    },
  };
}
