// The login page (/): sign in with email and password, then on to the API keys. The password
// lives only in its field, emptied as soon as it is sent.

import { ApiError, api, describe } from "../api.js";
import { byId, hide, show } from "../dom.js";
import { signedOutFrame } from "../layout.js";
import { loadSession, saveSession, takeNotice } from "../session.js";

// What the page is to say once, left by the page the user came from (signed out, say).
function showNotice(notice) {
  const pending = takeNotice();
  if (pending) {
    notice.setAttribute("role", pending.kind === "error" ? "alert" : "status");
    notice.classList.toggle("is-error", pending.kind === "error");
    show(notice, pending.text);
  }
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
      saveSession({ token: data.token, email: data.user.email });
      window.location.assign("/keys");
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
