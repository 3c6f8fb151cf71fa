// The answer to a second factor, as the login's second step and the reauthentication dialog
// both ask for it: a code from the authenticator app, or (behind a switch) a recovery code, and
// a "Use a passkey" button, each shown only when the account has it (`methods`, in the API's
// words: "totp", "recovery_code", "webauthn").

import { el } from "./dom.js";
import { passkeysSupported } from "./webauthn.js";

const MODES = {
  totp: {
    label: "Code from your authenticator app",
    hint: "The 6 digits the app shows now.",
    switchTo: "Use a recovery code instead",
    attrs: { inputmode: "numeric", autocomplete: "one-time-code", maxlength: "9", pattern: "[0-9 ]*" },
  },
  recovery_code: {
    label: "Recovery code",
    hint: "One of the codes you saved when you set up your second factor, like ABCD-EFGH-IJKL-MNOP. Each works once.",
    switchTo: "Use a code from your authenticator app instead",
    attrs: { inputmode: "text", autocomplete: "off", maxlength: "40", pattern: "" },
  },
};

// `prefix` names the elements' ids; `onPasskey()` runs when "Use a passkey" is pressed.
export function factorFields(prefix, onPasskey) {
  const input = el("input", {
    attrs: { id: `${prefix}-code`, name: "code", type: "text", spellcheck: "false", "aria-describedby": `${prefix}-code-hint` },
  });
  const label = el("label", { attrs: { for: `${prefix}-code` } });
  const hint = el("p", { className: "hint", attrs: { id: `${prefix}-code-hint` } });
  const field = el("div", { className: "field" }, [label, input, hint]);
  const switcher = el("button", { className: "link-button", attrs: { id: `${prefix}-switch`, type: "button" } });
  const passkey = el("button", {
    text: "Use a passkey",
    className: "secondary",
    attrs: { id: `${prefix}-passkey`, type: "button" },
  });
  const element = el("div", { className: "factor" }, [field, switcher, passkey]);
  let mode = "totp";
  let offered = [];

  function setMode(next) {
    mode = next;
    const words = MODES[mode];
    label.textContent = words.label;
    hint.textContent = words.hint;
    switcher.textContent = words.switchTo;
    for (const [name, value] of Object.entries(words.attrs)) {
      if (value) {
        input.setAttribute(name, value);
      } else {
        input.removeAttribute(name);
      }
    }
    input.value = "";
    input.removeAttribute("aria-invalid");
  }

  switcher.addEventListener("click", () => {
    setMode(mode === "totp" ? "recovery_code" : "totp");
    input.focus();
  });
  passkey.addEventListener("click", () => onPasskey());
  setMode("totp");

  return {
    element,
    passkeyButton: passkey,
    // Show what the account can answer with; false when it has none of them.
    offer(methods) {
      offered = Array.isArray(methods) ? methods : [];
      const typed = ["totp", "recovery_code"].filter((method) => offered.includes(method));
      field.hidden = typed.length === 0;
      switcher.hidden = typed.length < 2;
      passkey.hidden = !(offered.includes("webauthn") && passkeysSupported());
      if (typed.length) {
        setMode(typed[0]);
      }
      return offered.length > 0;
    },
    // Whether a code can be typed (TOTP or a recovery code).
    get typed() {
      return !field.hidden;
    },
    // {code} or {recovery_code} as typed, or null when the field is empty.
    answer() {
      const value = input.value.trim();
      if (field.hidden || !value) {
        return null;
      }
      return mode === "totp" ? { code: value.replace(/\s+/g, "") } : { recovery_code: value };
    },
    // What to ask for when the field is empty.
    missingText() {
      return mode === "totp" ? "Enter the code from your authenticator app." : "Enter a recovery code.";
    },
    invalid() {
      input.setAttribute("aria-invalid", "true");
      input.focus();
      input.select();
    },
    clear() {
      input.value = "";
      input.removeAttribute("aria-invalid");
    },
    focus() {
      (field.hidden ? passkey : input).focus();
    },
  };
}
