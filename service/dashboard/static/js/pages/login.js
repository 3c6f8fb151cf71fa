// The login page (/): sign in with email and password and, for an account with a second
// factor, a second step (a code from the authenticator app, a recovery code or a passkey),
// then on to the API keys. The password lives only in its field, emptied as soon as it is
// sent; the second step's mfa_token only in this module, forgotten when the step ends.

import { ApiError, api, describe, retryHint } from "../api.js";
import { byId, hide, show } from "../dom.js";
import { factorFields } from "../factor.js";
import { signedOutFrame } from "../layout.js";
import { loadSession, saveSession, takeNotice } from "../session.js";
import { promptFailedText, usePasskey } from "../webauthn.js";

// What the page is to say once, left by the page the user came from (signed out, say).
function showNotice(notice) {
  const pending = takeNotice();
  if (pending) {
    notice.setAttribute("role", pending.kind === "error" ? "alert" : "status");
    notice.classList.toggle("is-error", pending.kind === "error");
    show(notice, pending.text);
  }
}

// The session a login opened: kept for this tab, then the keys page.
function signedIn(data) {
  saveSession({ token: data.token, email: data.user.email });
  window.location.assign("/keys");
}

// What a refused answer at the second step says.
function secondStepText(failure) {
  if (!(failure instanceof ApiError)) {
    return "Signing in failed. Try again.";
  }
  if (failure.code === "mfa_code_invalid") {
    const left = failure.details && Number.isInteger(failure.details.attempts_left) ? failure.details.attempts_left : null;
    return left === null
      ? `${failure.message} Try again.`
      : `${failure.message} ${left} ${left === 1 ? "try" : "tries"} left before you must sign in again.`;
  }
  return `${describe(failure)}${retryHint(failure)}`;
}

// The second step: `back(text)` returns to the password step, saying `text` there.
function secondStep(back) {
  const form = byId("mfa-form");
  const submit = byId("mfa-submit");
  const error = byId("mfa-error");
  let pending = null; // {mfa_token}, while the step is shown
  const factor = factorFields("mfa", () => withPasskey());
  byId("mfa-factor").append(factor.element);

  function busy(yes) {
    submit.disabled = yes;
    factor.passkeyButton.disabled = yes;
  }

  // Send one answer; a refusal is said here, or (a dead mfa_token) back at the password step.
  async function answer(body) {
    busy(true);
    hide(error);
    try {
      const data = await api("POST", "/auth/login/mfa", { body: { mfa_token: pending.mfa_token, ...body } });
      pending = null;
      signedIn(data);
    } catch (failure) {
      busy(false);
      if (failure instanceof ApiError && failure.code === "mfa_token_invalid") {
        leave(failure.message);
        return;
      }
      show(error, secondStepText(failure));
      if (failure instanceof ApiError && failure.code === "mfa_code_invalid" && factor.typed && !body.webauthn) {
        factor.invalid();
      }
    }
  }

  async function withPasskey() {
    if (!pending) {
      return;
    }
    busy(true);
    hide(error);
    let assertion;
    try {
      const options = await api("POST", "/auth/login/mfa/webauthn-options", { body: { mfa_token: pending.mfa_token } });
      assertion = await usePasskey(options);
    } catch (failure) {
      busy(false);
      if (failure instanceof ApiError && failure.code === "mfa_token_invalid") {
        leave(failure.message);
        return;
      }
      show(error, failure instanceof ApiError ? secondStepText(failure) : promptFailedText(failure));
      return;
    }
    await answer({ webauthn: assertion });
  }

  function leave(text) {
    pending = null;
    factor.clear();
    form.hidden = true;
    back(text);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!pending) {
      return;
    }
    hide(error);
    const typed = factor.answer();
    if (!typed) {
      show(error, factor.typed ? factor.missingText() : "Use your passkey to finish signing in.");
      factor.focus();
      return;
    }
    await answer(typed);
  });
  byId("mfa-back").addEventListener("click", () => leave(""));

  return (data) => {
    pending = { mfa_token: data.mfa_token };
    factor.offer(data.methods);
    submit.hidden = !factor.typed; // a passkey alone has its own button
    hide(error);
    busy(false);
    form.hidden = false;
    factor.focus();
  };
}

function start() {
  signedOutFrame();
  const form = byId("login-form");
  const email = byId("login-email");
  const password = byId("login-password");
  const submit = byId("login-submit");
  const error = byId("login-error");
  const notice = byId("notice");
  showNotice(notice);

  function passwordStep(text) {
    submit.disabled = false;
    submit.textContent = "Sign in";
    form.hidden = false;
    if (text) {
      show(error, text);
    } else {
      hide(error);
    }
    password.focus();
  }
  const askSecondFactor = secondStep(passwordStep);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    hide(error);
    const address = email.value.trim();
    if (!address || !password.value) {
      show(error, "Enter your email and your password.");
      (address ? password : email).focus();
      return;
    }
    submit.disabled = true;
    submit.textContent = "Signing in…";
    try {
      const data = await api("POST", "/auth/login", {
        body: { email: address, password: password.value },
      });
      password.value = "";
      if (data.mfa_required) {
        hide(notice);
        form.hidden = true;
        askSecondFactor(data);
        return;
      }
      signedIn(data);
    } catch (failure) {
      hide(notice);
      show(error, failure instanceof ApiError ? describe(failure) : "Signing in failed.");
      password.value = "";
      password.focus();
      submit.disabled = false;
      submit.textContent = "Sign in";
    }
  });
}

if (loadSession()) {
  window.location.replace("/keys");
} else {
  start();
}
