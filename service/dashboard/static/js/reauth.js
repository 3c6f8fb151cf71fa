// The reauthentication dialog: a sensitive change (creating or rolling a key, the password,
// ending another session or all the others, second factors) answered 403
// reauthentication_required, so the user confirms the password (and the second factor, when
// the account has one) here; the new session token the service gives for it replaces the
// stored one, and the caller repeats the change (sessionCaller in caller.js). Cancelling
// changes nothing. The dialog is built by this module, once, the first time a page needs it:
// every signed-in page gets it without markup.
//
// With single sign-on on and an identity linked to the account, the dialog also offers
// "Confirm with <provider>": the provider asks the user to sign in again (prompt=login) in a
// window of its own, and the one-time code it comes back with is traded, with this session's
// token, for the new token. An account without a password is offered that alone.

import { ApiError, api, describe, endedOrThrown, retryHint, sessionEnded } from "./api.js";
import { el, hide, show } from "./dom.js";
import { factorFields } from "./factor.js";
import { loadSession, saveSession } from "./session.js";
import { actionText, providerName, providerWindow, signInMethods, ssoErrorText } from "./sso.js";
import { promptFailedText, usePasskey } from "./webauthn.js";

let parts = null; // the dialog's elements, once built
let asking = null; // the promise of the dialog open now: concurrent refusals share it

function build() {
  const password = el("input", {
    attrs: { id: "reauth-password", name: "password", type: "password", autocomplete: "current-password", maxlength: "1024", required: "" },
  });
  const error = el("p", { className: "error", attrs: { id: "reauth-error", role: "alert" } });
  error.hidden = true;
  const cancel = el("button", { text: "Cancel", className: "secondary", attrs: { id: "reauth-cancel", type: "button" } });
  const confirm = el("button", { text: "Confirm", className: "primary", attrs: { id: "reauth-confirm", type: "submit" } });
  const factorBox = el("div", { attrs: { id: "reauth-factor" } });
  const passwordBox = el("div", { className: "field" }, [
    el("label", { text: "Your password", attrs: { for: "reauth-password" } }),
    password,
  ]);
  const provider = el("button", { className: "secondary", attrs: { id: "reauth-sso", type: "button" } });
  const providerBox = el("div", { className: "field", attrs: { id: "reauth-sso-box" } }, [provider]);
  providerBox.hidden = true;
  const form = el("form", { attrs: { id: "reauth-form", method: "post", novalidate: "" } }, [
    error,
    providerBox,
    passwordBox,
    factorBox,
    el("div", { className: "actions" }, [cancel, confirm]),
  ]);
  const dialog = el(
    "dialog",
    { attrs: { id: "reauth-dialog", "aria-labelledby": "reauth-title", "aria-describedby": "reauth-description" } },
    [
      el("h2", { text: "Confirm it's you", attrs: { id: "reauth-title" } }),
      el("p", {
        text: "This change needs a recent sign-in. Enter your password, and it is made as soon as the service accepts it.",
        attrs: { id: "reauth-description" },
      }),
      form,
    ],
  );
  document.body.append(dialog);
  const description = dialog.querySelector("#reauth-description");
  return { dialog, form, password, passwordBox, provider, providerBox, description, error, cancel, confirm, factorBox };
}

// How this account can confirm: {password: bool, label: the provider's label, or "" when
// single sign-on is off or no identity of the account is linked}. Unreadable: the password.
async function waysOf(token) {
  const offered = await signInMethods();
  if (!offered.oidc) {
    return { password: true, label: "" };
  }
  try {
    const data = await api("GET", "/auth/identities", { token });
    const linked = Array.isArray(data.identities) && data.identities.length > 0;
    return { password: data.password !== false || !linked, label: linked ? offered.oidc.label : "" };
  } catch (failure) {
    if (sessionEnded(failure)) {
      throw failure;
    }
    return { password: true, label: "" };
  }
}

// What the account can answer with, as the login's second step names them; none when the
// factors can't be read (the service then says what is missing).
async function methodsOf(token) {
  try {
    const state = await api("GET", "/auth/mfa", { token });
    const methods = [];
    if (state.totp && state.totp.enabled) {
      methods.push("totp");
    }
    if (Array.isArray(state.webauthn) && state.webauthn.length) {
      methods.push("webauthn");
    }
    if (state.recovery_codes_left > 0) {
      methods.push("recovery_code");
    }
    return methods;
  } catch (failure) {
    if (sessionEnded(failure)) {
      throw failure;
    }
    return [];
  }
}

// Ask, with the session `token` that was refused: the new token, or null when cancelled.
function ask(token, methods, ways) {
  if (!parts) {
    parts = build();
  }
  const { dialog, form, password, passwordBox, provider, providerBox, description, error, cancel, confirm, factorBox } = parts;
  return new Promise((resolve, reject) => {
    let settled = false;
    const factor = factorFields("reauth", () => send(true));
    factorBox.replaceChildren(factor.element);
    const hasFactor = ways.password && factor.offer(methods);
    factorBox.hidden = !hasFactor;
    passwordBox.hidden = !ways.password;
    confirm.hidden = !ways.password;
    providerBox.hidden = !ways.label;
    provider.textContent = ways.label ? actionText("Confirm with", ways.label) : "";
    description.textContent = ways.password
      ? ways.label
        ? `This change needs a recent sign-in. Enter your password, or confirm with ${providerName(ways.label)}, and it is made as soon as the service accepts it.`
        : "This change needs a recent sign-in. Enter your password, and it is made as soon as the service accepts it."
      : `This change needs a recent sign-in. Sign in again with ${providerName(ways.label)}, and it is made as soon as the service accepts it.`;

    function finish(value, failure) {
      if (settled) {
        return;
      }
      settled = true;
      form.removeEventListener("submit", submitted);
      cancel.removeEventListener("click", cancelled);
      provider.removeEventListener("click", throughProvider);
      dialog.removeEventListener("close", closed);
      password.value = "";
      factor.clear();
      if (dialog.open) {
        dialog.close();
      }
      if (failure) {
        reject(failure);
      } else {
        resolve(value);
      }
    }

    async function send(withPasskey) {
      hide(error);
      password.removeAttribute("aria-invalid");
      if (!password.value) {
        show(error, "Enter your password.");
        password.setAttribute("aria-invalid", "true");
        password.focus();
        return;
      }
      const body = { password: password.value };
      confirm.disabled = true;
      factor.passkeyButton.disabled = true;
      try {
        if (withPasskey) {
          const options = await api("POST", "/auth/reauthenticate/webauthn-options", { token });
          try {
            body.webauthn = await usePasskey(options);
          } catch (prompt) {
            show(error, promptFailedText(prompt));
            return;
          }
        } else if (hasFactor) {
          const typed = factor.answer();
          if (!typed) {
            show(error, factor.typed ? factor.missingText() : "Use your passkey.");
            factor.focus();
            return;
          }
          Object.assign(body, typed);
        }
        const data = await api("POST", "/auth/reauthenticate", { token, body });
        saveSession({ ...(loadSession() || {}), token: data.token });
        finish(data.token);
      } catch (failure) {
        if (sessionEnded(failure)) {
          finish(null, failure);
          return;
        }
        const text = failure instanceof ApiError ? `${describe(failure)}${retryHint(failure)}` : "Confirming failed. Try again.";
        show(error, text);
        if (failure instanceof ApiError && failure.code === "mfa_code_invalid" && !withPasskey) {
          factor.invalid();
        } else {
          password.focus();
          password.select();
        }
      } finally {
        confirm.disabled = false;
        factor.passkeyButton.disabled = false;
      }
    }

    // Sign in again at the provider, in its own window; its code, traded with this session's
    // token, gives the new token as the password would.
    async function throughProvider() {
      hide(error);
      provider.disabled = true;
      confirm.disabled = true;
      try {
        const code = await providerWindow("reauthenticate", ways.label);
        if (settled) {
          return;
        }
        if (!code) {
          show(error, `The ${providerName(ways.label)} window was closed before you signed in: nothing was confirmed.`);
          return;
        }
        const data = await api("POST", "/auth/oidc/exchange", { token, body: { code } });
        saveSession({ ...(loadSession() || {}), token: data.token });
        finish(data.token);
      } catch (failure) {
        if (sessionEnded(failure)) {
          finish(null, failure);
          return;
        }
        show(error, failure instanceof ApiError ? `${ssoErrorText(failure, ways.label)}${retryHint(failure)}` : failure.message);
      } finally {
        provider.disabled = false;
        confirm.disabled = false;
      }
    }

    function submitted(event) {
      event.preventDefault();
      if (ways.password) {
        send(false);
      }
    }
    function cancelled() {
      finish(null);
    }
    // Escape closes the dialog: a cancel too. (Its close event comes a task later.)
    function closed() {
      if (!dialog.open) {
        finish(null);
      }
    }
    form.addEventListener("submit", submitted);
    cancel.addEventListener("click", cancelled);
    provider.addEventListener("click", throughProvider);
    dialog.addEventListener("close", closed);
    hide(error);
    confirm.disabled = false;
    dialog.showModal();
    (ways.password ? password : provider).focus();
  });
}

// The new session token once the user has confirmed, or null when they cancelled. A session
// found over meanwhile signs the user out (and never settles).
export function reauthenticate(token) {
  if (!asking) {
    asking = (async () => {
      try {
        const [methods, ways] = await Promise.all([methodsOf(token), waysOf(token)]);
        return await ask(token, methods, ways);
      } catch (failure) {
        return endedOrThrown(failure);
      } finally {
        asking = null;
      }
    })();
  }
  return asking;
}
