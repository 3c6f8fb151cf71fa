// The login page (/): sign in with email and password, or through the operator's identity
// provider (single sign-on, when the service offers it), and, for an account with a second
// factor, a second step (a code from the authenticator app, a recovery code or a passkey),
// then on to the page asked for before signing in, or the API keys. The password lives only
// in its field, emptied as soon as it is sent; the second step's mfa_token only in this
// module, forgotten when the step ends.
//
// Back from the provider, the page is opened with a one-time login code in its fragment
// (/#oidc_code=…): it is wiped from the address bar first, then traded once at
// POST /auth/oidc/exchange, whose answer is a password login's (a session, or the second step).

import { ApiError, api, describe, retryHint } from "../api.js";
import { byId, hide, show } from "../dom.js";
import { factorFields } from "../factor.js";
import { PAGES, signedOutFrame } from "../layout.js";
import { loadSession, saveSession, takeNotice, takeReturnAddress } from "../session.js";
import { actionText, goToProvider, handBack, providerName, signInMethods, ssoErrorText, takeFragment } from "../sso.js";
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

// The session a login opened: kept for this tab, then the page asked for before signing in (a
// copied link: its folder, order, preview), else the keys page.
function signedIn(data) {
  saveSession({ token: data.token, email: data.user.email });
  window.location.assign(takeReturnAddress(PAGES.map((page) => page.href), "/keys"));
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

// The provider's button, offered when the service says single sign-on is on; the password form
// hidden when password sign-in is off. A provider that is down is said here, and the password
// form (where on) stays as it is.
async function offerMethods(passwordForm, passwordOn) {
  const box = byId("sso");
  const button = byId("sso-start");
  const error = byId("sso-error");
  const offered = await signInMethods();
  passwordOn(offered.password);
  byId("no-way-in").hidden = offered.password || Boolean(offered.oidc);
  if (!offered.oidc) {
    return offered;
  }
  const label = offered.oidc.label;
  button.textContent = actionText("Sign in with", label);
  byId("sso-or").hidden = !offered.password;
  box.hidden = false;
  button.addEventListener("click", async () => {
    hide(error);
    button.disabled = true;
    try {
      await goToProvider();
    } catch (failure) {
      button.disabled = false;
      show(error, ssoErrorText(failure, label));
      if (offered.password && !passwordForm.hidden) {
        byId("login-email").focus();
      }
    }
  });
  return offered;
}

function start(fragment) {
  signedOutFrame();
  const form = byId("login-form");
  const email = byId("login-email");
  const password = byId("login-password");
  const submit = byId("login-submit");
  const error = byId("login-error");
  const notice = byId("notice");
  const status = byId("login-status");
  let passwordAllowed = true;
  let ssoOffered = false;
  showNotice(notice);

  function passwordStep(text) {
    submit.disabled = false;
    submit.textContent = "Sign in";
    form.hidden = !passwordAllowed;
    byId("sso").hidden = !ssoOffered;
    if (text) {
      show(passwordAllowed ? error : byId("sso-error"), text);
    } else {
      hide(error);
    }
    if (passwordAllowed) {
      password.focus();
    }
  }

  // The provider's trip failed: said at its button (at the password form when it has none),
  // the password form usable as before.
  function ssoFailed(text) {
    passwordStep(ssoOffered ? "" : text);
    if (ssoOffered) {
      show(byId("sso-error"), text);
    }
  }
  const askSecondFactor = secondStep(passwordStep);

  // The password form, shown or hidden as the service allows password sign-in.
  function passwordOn(allowed) {
    passwordAllowed = allowed;
    if (!allowed) {
      form.hidden = true;
    }
  }

  // The one-time code the provider's trip left: traded once, then as a password login goes on.
  // A link or a step-up whose page is gone (the window that asked was closed) is finished here
  // with this tab's session, then on to the page it belongs to.
  async function exchange(code, label, purpose) {
    show(status, `Finishing signing in${label ? ` with ${providerName(label)}` : ""}…`);
    form.hidden = true;
    const session = purpose && purpose !== "login" ? loadSession() : null;
    try {
      const data = await api("POST", "/auth/oidc/exchange", { token: session ? session.token : undefined, body: { code } });
      if (session) {
        if (typeof data.token === "string" && data.token) {
          saveSession({ ...session, token: data.token });
        }
        window.location.replace(purpose === "link" ? "/security" : "/keys");
        return;
      }
      hide(status);
      if (data.mfa_required) {
        byId("sso").hidden = true;
        askSecondFactor(data);
        return;
      }
      signedIn(data);
    } catch (failure) {
      hide(status);
      ssoFailed(ssoErrorText(failure, label));
    }
  }

  const methods = offerMethods(form, passwordOn).then((offered) => {
    ssoOffered = Boolean(offered.oidc);
    return offered;
  });
  if (fragment && fragment.code) {
    methods.then((offered) => exchange(fragment.code, offered.oidc ? offered.oidc.label : "", fragment.purpose));
  } else if (fragment && fragment.error) {
    methods.then((offered) => ssoFailed(ssoErrorText(fragment.error, offered.oidc ? offered.oidc.label : "")));
  }

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
        byId("sso").hidden = true;
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

// What the provider left in the address is taken (and wiped) before anything else: in the
// window a signed-in page opened for the provider it goes back to that page; otherwise it signs
// in here, even over a session this tab still has.
const fragment = takeFragment();
if (fragment && handBack(fragment)) {
  // this window is closing
} else if (loadSession() && !fragment) {
  window.location.replace("/keys");
} else {
  start(fragment);
}
