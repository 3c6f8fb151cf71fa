// The API keys page (/keys): list, create, edit, roll, disable, enable and revoke the account's
// keys. Each part lives in keys/; this wires them together through `keys`, what they share.

import { ApiError, describe } from "../api.js";
import { sessionCaller } from "../caller.js";
import { byId, confirmation, el, show } from "../dom.js";
import { createDialog } from "../keys/create.js";
import { editPanel } from "../keys/edit.js";
import { enabling } from "../keys/enabling.js";
import { keyList } from "../keys/list.js";
import { revokeDialog } from "../keys/revoke.js";
import { rollDialog } from "../keys/roll.js";
import { secretPanel } from "../keys/secret.js";
import { uploaderDialog } from "../keys/uploaders.js";
import { signedInFrame } from "../layout.js";
import { requireSession } from "../session.js";

// "Rolling the key failed: <why>", and when to try again if the server said.
function failed(what, failure) {
  const why = failure instanceof ApiError ? describe(failure) : "No answer.";
  const retry =
    failure instanceof ApiError && failure.retryAfter ? ` Try again in ${failure.retryAfter} s.` : "";
  return `${what} failed: ${why}${retry}`;
}

// This page's words for a refused logout: the reason, then when to try again.
function logoutFailed(failure) {
  const why = failure instanceof ApiError ? describe(failure) : "Logging out failed.";
  const retry =
    failure instanceof ApiError && failure.retryAfter ? `Try again in ${failure.retryAfter} s.` : "Try again.";
  return `Logging out failed: ${why} You are still signed in here, and the session may still be valid. ${retry}`;
}

// The confirmation asked before any change that refuses requests that work now: `items` says
// what stops working, and `run(report)` makes the change (see confirmation in dom.js).
function confirmer() {
  const title = byId("confirm-title");
  const description = byId("confirm-description");
  const list = byId("confirm-list");
  const ok = byId("confirm-ok");
  const asked = confirmation({
    dialog: byId("confirm-dialog"),
    cancel: byId("confirm-cancel"),
    confirm: ok,
    error: byId("confirm-error"),
  });
  return (what) => {
    title.textContent = what.title;
    description.textContent = what.description;
    list.replaceChildren(...what.items.map((text) => el("li", { text })));
    list.hidden = what.items.length === 0;
    ok.textContent = what.action;
    asked.open(what.run);
  };
}

function start(session) {
  const call = sessionCaller(session.token);
  const pageStatus = byId("page-status");
  const keys = {
    call,
    failed,
    pageStatus,
    listTitle: byId("keys-title"),
    keyPath: (key) => `/keys/${encodeURIComponent(key.id)}`,
    announce: (text) => show(pageStatus, text),
  };
  signedInFrame("keys", session, { call, logoutFailed, beforeLeave: () => keys.secret.hide() });

  keys.confirmFirst = confirmer();
  const confirmDialog = byId("confirm-dialog");
  keys.list = keyList({
    call,
    edit: (key) => keys.edit.open(key),
    roll: (key) => keys.roll.open(key),
    toggle: (key, button) => keys.enabling.toggle(key, button),
    revoke: (key) => keys.revoke.open(key),
  });
  const create = createDialog(keys);
  keys.secret = secretPanel(() => create.focus());
  keys.edit = editPanel(keys);
  keys.roll = rollDialog(keys);
  keys.revoke = revokeDialog(keys);
  keys.enabling = enabling(keys);
  const uploaders = uploaderDialog(keys);

  keys.closeDialogs = () => {
    for (const open of [create.dialog, uploaders.dialog, keys.roll.dialog, confirmDialog, keys.revoke.dialog]) {
      if (open.open) {
        open.close("done");
      }
    }
  };

  // After a change: say what was done, show the list as it now is, and put the focus on it.
  keys.changed = async (text) => {
    keys.announce(text);
    await keys.list.refresh();
    keys.listTitle.focus();
  };

  // A key revoked meanwhile (elsewhere, or reported leaked): say so and show the list as it is.
  keys.gone = async (failure) => {
    if (!(failure instanceof ApiError && failure.code === "key_not_found")) {
      return false;
    }
    keys.closeDialogs();
    keys.edit.close();
    await keys.changed(failure.message);
    return true;
  };

  keys.list.refresh();
}

const session = requireSession("Sign in to manage your API keys.");
if (session) {
  start(session);
}
