// The authenticator app (TOTP) on the security page: set up (the QR code and the secret as
// text), confirmed with a code, which turns it on and shows the recovery codes once, and
// turned off behind a confirmation.

import { ApiError, failedText } from "../api.js";
import { byId, el, hide, show } from "../dom.js";
import { svgFromMarkup } from "../svg.js";
import { whenText } from "../time.js";

// "JBSW Y3DP EHPK 3PXP": the secret in groups of four, for typing.
function grouped(secret) {
  return String(secret).replace(/(.{4})(?=.)/g, "$1 ");
}

// `showCodes(codes)` shows new recovery codes; `ask(what, run)` the confirmation dialog;
// `done(text)` says what changed and reloads the factors.
export function totpSection({ call, ask, showCodes, done }) {
  const state = byId("totp-state");
  const unavailable = byId("totp-unavailable");
  const enable = byId("totp-enable");
  const disable = byId("totp-disable");
  const setup = byId("totp-setup");
  const qr = byId("totp-qr");
  const secret = byId("totp-secret");
  const expires = byId("totp-expires");
  const form = byId("totp-confirm-form");
  const code = byId("totp-code");
  const confirm = byId("totp-confirm");
  const error = byId("totp-error");
  const pageError = byId("page-error");
  let enabled = false;

  function closeSetup() {
    setup.hidden = true;
    qr.replaceChildren();
    secret.textContent = "";
    code.value = "";
    hide(error);
  }

  function showQr(markup) {
    try {
      const picture = svgFromMarkup(markup);
      // Drawn at the style sheet's size: a picture with no viewBox would not scale.
      const width = picture.getAttribute("width");
      const height = picture.getAttribute("height");
      if (!picture.hasAttribute("viewBox") && width && height) {
        picture.setAttribute("viewBox", `0 0 ${width} ${height}`);
      }
      picture.setAttribute("role", "img");
      picture.setAttribute("aria-label", "QR code to scan with your authenticator app");
      qr.replaceChildren(picture);
    } catch {
      qr.replaceChildren(el("p", { className: "hint", text: "The QR code can't be shown here: type the key below into the app." }));
    }
  }

  enable.addEventListener("click", async () => {
    enable.disabled = true;
    hide(pageError);
    try {
      const data = await call("POST", "/auth/mfa/totp");
      showQr(data.qr_svg);
      secret.textContent = grouped(data.secret);
      expires.textContent = `Finish the setup by ${whenText(data.expires_at)}, or start again.`;
      setup.hidden = false;
      enable.hidden = true;
      code.focus();
    } catch (failure) {
      show(pageError, failedText("Setting up the authenticator app", failure));
    } finally {
      enable.disabled = false;
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    hide(error);
    code.removeAttribute("aria-invalid");
    const digits = code.value.replace(/\s+/g, "");
    if (!/^\d{6}$/.test(digits)) {
      show(error, "Enter the 6 digits the app shows.");
      code.setAttribute("aria-invalid", "true");
      code.focus();
      return;
    }
    confirm.disabled = true;
    try {
      const data = await call("POST", "/auth/mfa/totp/confirm", { code: digits });
      closeSetup();
      showCodes(Array.isArray(data.recovery_codes) ? data.recovery_codes : []);
      await done(`The authenticator app is on: signing in now asks for its code. Other sessions ended: ${data.sessions_ended || 0}.`);
    } catch (failure) {
      if (failure instanceof ApiError && failure.code === "totp_enrollment_not_found") {
        closeSetup();
        enable.hidden = false;
        show(pageError, `${failure.message} Start the setup again.`);
        return;
      }
      show(error, failedText("Turning on the authenticator app", failure));
      code.setAttribute("aria-invalid", "true");
      code.focus();
      code.select();
    } finally {
      confirm.disabled = false;
    }
  });

  byId("totp-cancel").addEventListener("click", () => {
    closeSetup();
    enable.hidden = !enable.dataset.available || enabled;
    enable.focus();
  });

  disable.addEventListener("click", () =>
    ask(
      {
        title: "Turn off the authenticator app?",
        description:
          "Signing in no longer asks for its code. Without a passkey left, your recovery codes stop working too, and your other sessions are signed out.",
        confirmText: "Turn off",
      },
      async () => {
        const data = await call("DELETE", "/auth/mfa/totp");
        return `The authenticator app is off. Other sessions ended: ${data.sessions_ended || 0}.`;
      },
      "Turning off the authenticator app",
    ),
  );

  return {
    render(mfa) {
      const available = Boolean(mfa.available && mfa.available.totp);
      const totp = mfa.totp || {};
      enabled = Boolean(totp.enabled);
      enable.dataset.available = available ? "yes" : "";
      unavailable.hidden = available || enabled;
      state.hidden = false;
      state.textContent = enabled ? `On since ${whenText(totp.enabled_at)}.` : "Off.";
      enable.hidden = !available || enabled || !setup.hidden;
      disable.hidden = !enabled;
      if (enabled) {
        closeSetup();
      }
    },
  };
}
