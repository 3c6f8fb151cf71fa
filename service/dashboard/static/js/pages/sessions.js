// The sessions page (/sessions): every place the account is signed in (and how: the password or
// the identity provider, with a second factor or not), to end one or all the others, and the password change. The passwords live
// only in their fields, emptied once the change is made.

import { ApiError, failedText } from "../api.js";
import { sessionCaller } from "../caller.js";
import { deviceNode, deviceText } from "../devices.js";
import { activityHref } from "../activity/address.js";
import { byId, confirmation, el, hide, show } from "../dom.js";
import { signedInFrame } from "../layout.js";
import { requireSession } from "../session.js";
import { providerText, signInMethods } from "../sso.js";
import { cell, rowButton } from "../table.js";
import { when } from "../time.js";

// "Chrome on Linux", or the User-Agent itself when it is no browser's, shortened.
function device(item) {
  return deviceText(item.user_agent);
}

// How the session was opened: its way in (the password, or the identity provider by name) and
// its assurance level, as the API lists them.
function factorsText(item) {
  if (item.method === "oidc") {
    const provider = providerText(item.provider);
    return item.aal === 2 ? `With ${provider} and a second factor` : `With ${provider}`;
  }
  if (item.method === "passkey") {
    return "With a passkey";
  }
  return item.aal === 2 ? "With a second factor" : "Password only";
}

// `end(item)` opens the confirmation to end the session `item`.
function sessionRow(item, end) {
  const deviceBox = el("div", { className: "device" }, [deviceNode(item.user_agent)]);
  let action;
  if (item.current) {
    deviceBox.prepend(el("strong", { className: "this-device", text: "This device" }));
    action = el("span", { className: "hint", text: "Log out to end it" });
  } else {
    action = rowButton("End", "danger", ` session on ${device(item)}`);
    action.dataset.sessionId = item.id;
    action.addEventListener("click", () => end(item));
  }
  const row = el("tr", {}, [
    cell("Device", "key-name session-device", deviceBox),
    cell("Address", "session-ip", el("code", { text: item.ip || "unknown" })),
    cell("Signed in", "session-created", [
      when(item.created_at, "—"),
      el("div", { className: "hint session-factors", text: factorsText(item) }),
    ]),
    cell("Last seen", "session-last-seen", [
      when(item.last_seen_at, "—"),
      // What the session did, and its sign-in, in the audit trail.
      el("a", { className: "session-activity", attrs: { href: activityHref("session_id", item.id) } }, [
        "Activity",
        el("span", { className: "visually-hidden", text: ` of the session on ${device(item)}` }),
      ]),
    ]),
    cell("Expires", "session-expires", when(item.expires_at, "—")),
    cell("Actions", "key-actions", action),
  ]);
  row.dataset.sessionId = item.id;
  if (item.current) {
    row.className = "is-current";
  }
  return row;
}

// End one session ({session}) or every other ({others: true}), behind the same confirmation.
// `afterwards()` shows the list as it now is.
function endDialog(call, pageStatus, afterwards) {
  const dialog = byId("end-dialog");
  const title = byId("end-title");
  const description = byId("end-description");
  const confirm = byId("end-confirm");
  const asked = confirmation({ dialog, cancel: byId("end-cancel"), confirm, error: byId("end-error") });

  async function end(what, report) {
    hide(pageStatus);
    try {
      if (what.session) {
        await call("DELETE", `/auth/sessions/${encodeURIComponent(what.session.id)}`);
        dialog.close("ended");
        show(pageStatus, `Ended the session on ${device(what.session)}.`);
      } else {
        const data = await call("DELETE", "/auth/sessions");
        const count = Number.isInteger(data.ended) ? data.ended : 0;
        dialog.close("ended");
        show(pageStatus, `Ended ${count} other ${count === 1 ? "session" : "sessions"}.`);
      }
    } catch (failure) {
      if (!(what.session && failure instanceof ApiError && failure.code === "session_not_found")) {
        report(failedText(what.session ? "Ending the session" : "Ending the other sessions", failure));
        return;
      }
      dialog.close("gone");
      show(pageStatus, failure.message);
    }
    await afterwards();
  }

  return (what) => {
    if (what.session) {
      title.textContent = "End this session?";
      description.textContent =
        `The session on ${device(what.session)} (address ${what.session.ip || "unknown"}) is ` +
        "signed out from its next request.";
      confirm.textContent = "End session";
    } else {
      title.textContent = "End all other sessions?";
      description.textContent =
        "Every session but this one is signed out from its next request. You stay signed in here.";
      confirm.textContent = "End other sessions";
    }
    asked.open((report) => end(what, report));
  };
}

// The password change: the two values leave the fields only for the request's body, and stay
// in them until the change is made, so a refusal can be corrected and tried again. The new
// password's minimum is the service's own, which the page was served with (its minlength).
// `afterwards()` shows the sessions as they now are (the others were ended).
function passwordForm(call, afterwards) {
  const form = byId("password-form");
  const current = byId("current-password");
  const next = byId("new-password");
  const submit = byId("password-submit");
  const status = byId("password-status");
  const error = byId("password-error");
  const minimum = next.minLength > 0 ? next.minLength : 1;

  function refuse(text, field) {
    show(error, text);
    field.setAttribute("aria-invalid", "true");
    field.focus();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    hide(status);
    hide(error);
    current.removeAttribute("aria-invalid");
    next.removeAttribute("aria-invalid");
    if (!current.value) {
      refuse("Enter your current password.", current);
      return;
    }
    // Counted as the service counts: characters, not UTF-16 units.
    const length = [...next.value].length;
    if (length < minimum) {
      refuse(
        length === 0
          ? `Enter a new password of at least ${minimum} characters.`
          : `The new password is too short: it has ${length} ${length === 1 ? "character" : "characters"}, ` +
              `and the service asks for at least ${minimum}.`,
        next,
      );
      return;
    }
    submit.disabled = true;
    try {
      const data = await call("POST", "/auth/password", {
        current_password: current.value,
        new_password: next.value,
      });
      current.value = "";
      next.value = "";
      const count = Number.isInteger(data.sessions_ended) ? data.sessions_ended : 0;
      show(status, `Your password was changed. Other sessions were ended: ${count}.`);
      await afterwards();
    } catch (failure) {
      // The service's words are the login's ("The email or password is incorrect"), but this
      // form has no email: only the current password can be wrong.
      if (failure instanceof ApiError && failure.code === "invalid_credentials") {
        refuse("Changing the password failed: the current password is wrong. Nothing was changed.", current);
      } else {
        show(error, failedText("Changing the password", failure));
        current.focus();
      }
      current.select();
    } finally {
      submit.disabled = false;
    }
  });
}

function start(session) {
  const call = sessionCaller(session.token);
  signedInFrame("sessions", session, { call });
  const pageStatus = byId("page-status");
  const table = byId("sessions-table");
  const tbody = byId("sessions-body");
  const loading = byId("sessions-loading");
  const listError = byId("sessions-error");
  const listTitle = byId("sessions-title");
  const endOthers = byId("end-others");
  byId("password-username").value = session.email || "";

  async function refresh() {
    hide(listError);
    try {
      const [data] = await Promise.all([call("GET", "/auth/sessions"), signInMethods()]);
      const sessions = Array.isArray(data.sessions) ? data.sessions : [];
      tbody.replaceChildren(...sessions.map((item) => sessionRow(item, (ended) => openEnd({ session: ended }))));
      table.hidden = sessions.length === 0;
      endOthers.hidden = !sessions.some((item) => !item.current);
    } catch (failure) {
      show(listError, failedText("Loading your sessions", failure));
    } finally {
      loading.hidden = true;
    }
  }

  const openEnd = endDialog(call, pageStatus, async () => {
    await refresh();
    listTitle.focus();
  });
  endOthers.addEventListener("click", () => openEnd({ others: true }));
  passwordForm(call, refresh);
  refresh();
}

const session = requireSession("Sign in to manage your sessions.");
if (session) {
  start(session);
}
