// The panel that shows a new key's secret (created or rolled) once. The secret lives only in
// the page's memory, this panel's one input, until it is dismissed or the page is left.

import { byId, hide, show } from "../dom.js";
import { whenText } from "../time.js";

// `afterDismiss()` runs when the user has hidden the secret, to put the focus somewhere useful.
export function secretPanel(afterDismiss) {
  const panel = byId("new-secret");
  const title = byId("new-secret-title");
  const lead = byId("new-secret-lead");
  const name = byId("new-secret-name");
  const value = byId("new-secret-value");
  const grace = byId("new-secret-grace");
  const copyStatus = byId("copy-status");

  function hideSecret() {
    value.value = "";
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

  byId("copy-secret").addEventListener("click", async () => {
    const secret = value.value;
    try {
      await navigator.clipboard.writeText(secret);
      copyStatus.textContent = "Copied to the clipboard.";
    } catch {
      // No clipboard access: select it so the user can copy it themselves.
      value.focus();
      value.select();
      copyStatus.textContent = "Copying was blocked: the secret is selected, copy it with Ctrl+C.";
    }
  });

  byId("dismiss-secret").addEventListener("click", () => {
    hideSecret();
    afterDismiss();
  });

  return { show: showSecret, hide: hideSecret };
}
