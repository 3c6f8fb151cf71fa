// The panel that shows a new key's secret (created or rolled) once, with a command that uses
// it, ready to paste. The secret lives only in the page's memory, this panel's input and its
// command, until it is dismissed or the page is left.

import { API } from "../api.js";
import { byId, hide, show } from "../dom.js";
import { whenText } from "../time.js";

// A first request with the key, for what it may do here: list files, else upload one, else the
// check a gateway makes for the first permission it holds (which the key passes). Each by curl,
// against this page's own origin, the secret in the header it goes in.
export function usage(secret, permissions, origin) {
  const held = Array.isArray(permissions) ? permissions : [];
  const header = `-H 'X-API-Key: ${secret}'`;
  if (held.includes("files.read")) {
    return { what: "list your files with this key.", command: `curl ${header} '${origin}${API}/files'` };
  }
  if (held.includes("files.write")) {
    return {
      what: "upload a file with this key.",
      command: `curl ${header} -F 'file=@./report.pdf' '${origin}${API}/files'`,
    };
  }
  const first = held[0] || "files.read";
  return {
    what: `ask the service what a gateway asks before it lets this key through (${first}).`,
    command: `curl -i ${header} -H 'X-Required-Permission: ${first}' '${origin}${API}/auth/verify'`,
  };
}

// `afterDismiss()` runs when the user has hidden the secret, to put the focus somewhere useful.
export function secretPanel(afterDismiss) {
  const panel = byId("new-secret");
  const title = byId("new-secret-title");
  const lead = byId("new-secret-lead");
  const name = byId("new-secret-name");
  const value = byId("new-secret-value");
  const grace = byId("new-secret-grace");
  const usageWhat = byId("new-secret-usage-what");
  const usageCommand = byId("new-secret-usage");
  const copyStatus = byId("copy-status");

  function hideSecret() {
    value.value = "";
    usageCommand.textContent = "";
    name.textContent = "";
    copyStatus.textContent = "";
    hide(grace);
    panel.hidden = true;
  }

  // The secret of a new key, or of a rolled one (with how long the one it replaces works).
  function showSecret(created, rolled) {
    lead.textContent = rolled ? "New secret for" : "Your new key:";
    name.textContent = created.name;
    value.value = created.secret_key;
    const example = usage(created.secret_key, created.permissions, window.location.origin);
    usageWhat.textContent = example.what;
    usageCommand.textContent = example.command;
    copyStatus.textContent = "";
    if (!rolled) {
      hide(grace);
    } else if (created.previous_secret_expires_at) {
      show(
        grace,
        `The old secret keeps working until ${whenText(created.previous_secret_expires_at)}; ` +
          "then only this one works.",
      );
    } else {
      show(grace, "The old secret no longer works: only this one does.");
    }
    panel.hidden = false;
    title.focus();
  }

  // Copies `text`; when the browser refuses, `fallback()` selects it for the user to copy.
  async function copy(text, done, fallback) {
    try {
      await navigator.clipboard.writeText(text);
      copyStatus.textContent = done;
    } catch {
      fallback();
    }
  }

  byId("copy-secret").addEventListener("click", () =>
    copy(value.value, "Copied to the clipboard.", () => {
      value.focus();
      value.select();
      copyStatus.textContent = "Copying was blocked: the secret is selected, copy it with Ctrl+C.";
    }),
  );

  byId("copy-usage").addEventListener("click", () =>
    copy(usageCommand.textContent, "Copied the command to the clipboard.", () => {
      window.getSelection().selectAllChildren(usageCommand);
      copyStatus.textContent = "Copying was blocked: the command is selected, copy it with Ctrl+C.";
    }),
  );

  byId("dismiss-secret").addEventListener("click", () => {
    hideSecret();
    afterDismiss();
  });

  return { show: showSecret, hide: hideSecret };
}
