// Recovery codes on the security page: shown once (when TOTP is turned on, or new ones are
// made), with copy and download; and how many are left.

import { byId, el, saveAsFile } from "../dom.js";

export function codesSection({ call, ask, email }) {
  const panel = byId("codes-panel");
  const title = byId("codes-title");
  const list = byId("codes-list");
  const status = byId("codes-copy-status");
  const left = byId("codes-left");
  const regenerate = byId("codes-regenerate");
  let shown = [];

  function hideCodes() {
    shown = [];
    list.replaceChildren();
    status.textContent = "";
    panel.hidden = true;
  }

  function showCodes(codes) {
    shown = codes.slice();
    list.replaceChildren(...shown.map((code) => el("li", { text: code })));
    status.textContent = "";
    panel.hidden = false;
    title.focus();
  }

  function asText() {
    return (
      `Recovery codes for ${email || "your account"} on ${window.location.host}\n` +
      "Each one works once, when your authenticator app or passkey is not at hand.\n\n" +
      `${shown.join("\n")}\n`
    );
  }

  byId("codes-copy").addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(shown.join("\n"));
      status.textContent = "Copied the codes to the clipboard.";
    } catch {
      window.getSelection().selectAllChildren(list);
      status.textContent = "Copying was blocked: the codes are selected, copy them with Ctrl+C.";
    }
  });

  byId("codes-download").addEventListener("click", () => {
    saveAsFile(asText(), "filehost-recovery-codes.txt", "text/plain");
    status.textContent = "Downloaded filehost-recovery-codes.txt.";
  });

  byId("codes-dismiss").addEventListener("click", () => {
    hideCodes();
    byId("codes-section-title").focus();
  });

  regenerate.addEventListener("click", () =>
    ask(
      {
        title: "Make new recovery codes?",
        description: "The codes you have now stop working, and your other sessions are signed out.",
        confirmText: "Make new codes",
      },
      async () => {
        const data = await call("POST", "/auth/mfa/recovery-codes");
        showCodes(Array.isArray(data.recovery_codes) ? data.recovery_codes : []);
        return `New recovery codes made: the old ones no longer work. Other sessions ended: ${data.sessions_ended || 0}.`;
      },
      "Making new recovery codes",
    ),
  );

  return {
    showCodes,
    render(mfa) {
      const hasFactor = Boolean((mfa.totp && mfa.totp.enabled) || (Array.isArray(mfa.webauthn) && mfa.webauthn.length));
      const count = Number.isInteger(mfa.recovery_codes_left) ? mfa.recovery_codes_left : 0;
      regenerate.hidden = !hasFactor;
      if (!hasFactor) {
        left.textContent = "Recovery codes come with a second factor: set one up first.";
      } else if (count === 0) {
        left.textContent = "You have no recovery codes left. Make new ones, and keep them safe.";
      } else {
        left.textContent = `${count} ${count === 1 ? "recovery code" : "recovery codes"} left.`;
      }
    },
  };
}
