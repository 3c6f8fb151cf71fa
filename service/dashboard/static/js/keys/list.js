// The list of the account's keys: a row per key with its settings, what it did over the last
// 30 days (filled in once each key's usage arrives, usage.js) with a link to its activity, and
// its buttons (Edit, Roll, Disable or Enable, Revoke), each of which calls into `actions`.

import { activityHref } from "../activity/address.js";
import { ApiError, describe } from "../api.js";
import { byId, el, hide, show } from "../dom.js";
import { cell, rowButton } from "../table.js";
import { when } from "../time.js";
import { folderTree } from "../folders.js";
import { rateText } from "./changes.js";
import { foldersNode } from "./folders.js";
import { fillUsage } from "./usage.js";

const UPLOADER_NAMES = { sharex: "ShareX", curl: "curl" };

// An uploader's key is upload-only whatever its permission names: said first, plainly.
function permissionsNode(key) {
  const list = el(
    "ul",
    { className: "perm-list", attrs: { "aria-label": "Permissions" } },
    (key.permissions || []).map((name) => el("li", { text: name })),
  );
  if (!key.uploader) {
    return list;
  }
  const made = UPLOADER_NAMES[key.uploader] || key.uploader;
  return el("div", {}, [
    el("span", {
      className: "badge is-upload-only",
      text: "Upload only",
      attrs: { title: `Made for a ${made} uploader: it may upload (and alias what it uploads), nothing else` },
    }),
    list,
  ]);
}

function allowedNode(key) {
  const allowed = Array.isArray(key.allowed_ips) ? key.allowed_ips : [];
  if (!allowed.length) {
    return document.createTextNode("Anywhere");
  }
  return el(
    "ul",
    { className: "ip-list", attrs: { "aria-label": "Allowed from" } },
    allowed.map((network) => el("li", {}, [el("code", {}, breakableAfterColons(network))])),
  );
}

// An IPv6 network may break after a colon, and only there, when its column is too narrow for
// it whole (else one long address widens the whole table past its card).
function breakableAfterColons(network) {
  const parts = network.split(":");
  return parts.flatMap((part, index) => (index < parts.length - 1 ? [`${part}:`, el("wbr")] : [part]));
}

// The secret's prefix, and how long the secret it replaced still works after a roll.
function prefixNodes(key) {
  const prefix = [el("code", { text: key.key_prefix })];
  if (key.previous_secret_expires_at) {
    prefix.push(
      el("p", { className: "grace" }, ["Old secret ends ", when(key.previous_secret_expires_at, "—")]),
    );
  }
  return prefix;
}

function statusBadge(disabled) {
  return el("span", {
    className: disabled ? "badge is-off" : "badge is-on",
    text: disabled ? "Disabled" : "Enabled",
  });
}

// `actions`: {edit(key), roll(key), toggle(key, button), revoke(key)}.
export function keyList(actions) {
  const table = byId("keys-table");
  const tbody = byId("keys-body");
  const loading = byId("keys-loading");
  const empty = byId("keys-empty");
  const listError = byId("keys-error");
  const buttonsOf = new Map(); // key id -> its row's buttons, to give the focus back

  function rowButtons(key) {
    const disabled = key.enabled === false;
    // Every button names its key, for a screen reader's list of buttons.
    const button = (text, className, action) => {
      const made = rowButton(text, className, ` key ${key.name}`);
      made.dataset.action = action;
      return made;
    };
    const edit = button("Edit", "secondary", "edit");
    edit.addEventListener("click", () => actions.edit(key));
    const roll = button("Roll", "secondary", "roll");
    roll.addEventListener("click", () => actions.roll(key));
    const toggle = disabled ? button("Enable", "secondary", "enable") : button("Disable", "danger", "disable");
    toggle.addEventListener("click", () => actions.toggle(key, toggle));
    const revoke = button("Revoke", "danger", "revoke");
    revoke.dataset.keyId = key.id;
    revoke.addEventListener("click", () => actions.revoke(key));
    buttonsOf.set(key.id, { edit, roll, toggle, revoke });
    return [edit, roll, toggle, revoke];
  }

  function keyRow(key, folders, usageCells) {
    const disabled = key.enabled === false;
    const rate = key.rate_limit ? rateText(key.rate_limit) : "Default";
    // When it was last used (and from where, once its usage is read), over its last 30 days.
    const lastUse = el("span", { className: "last-use" }, [when(key.last_used_at, "Never")]);
    const usage = el("div", { className: "key-usage" }, [el("span", { className: "hint", text: "Loading…" })]);
    usageCells.set(key.id, { usage, lastUse });
    // Everything done with the key and to it, in the audit trail.
    const activity = el("a", { className: "key-activity", attrs: { href: activityHref("key_id", key.id) } }, [
      "Activity",
      el("span", { className: "visually-hidden", text: ` of key ${key.name}` }),
    ]);
    const row = el("tr", {}, [
      cell("Name", "key-name", document.createTextNode(key.name)),
      cell("Status", "key-status", statusBadge(disabled)),
      cell("Prefix", "key-prefix", prefixNodes(key)),
      cell("Permissions", "key-permissions", permissionsNode(key)),
      cell("Folders", "key-folders", foldersNode(key, folders)),
      cell("Allowed from", "key-allowed", allowedNode(key)),
      cell("Rate limit", "key-rate", document.createTextNode(rate)),
      cell("Created", "key-created", when(key.created_at, "—")),
      cell("Expires", "key-expires", when(key.expires_at, "Never")),
      cell("Last used", "key-last-used", [lastUse, usage, activity]),
      cell("Actions", "key-actions", el("div", { className: "row-actions" }, rowButtons(key))),
    ]);
    row.dataset.keyId = key.id;
    if (disabled) {
      row.className = "is-disabled";
    }
    return row;
  }

  // Shows the keys as the server has them now.
  async function refresh() {
    hide(listError);
    try {
      const data = await actions.call("GET", "/keys");
      const keys = Array.isArray(data.keys) ? data.keys : [];
      // The paths of the folders keys are bound to; without them, their ids.
      let folders = [];
      if (keys.some((key) => Array.isArray(key.folder_ids) && key.folder_ids.length)) {
        folders = await folderTree(actions.call).then(
          (tree) => tree.folders,
          () => [],
        );
      }
      buttonsOf.clear();
      const usageCells = new Map();
      tbody.replaceChildren(...keys.map((key) => keyRow(key, folders, usageCells)));
      table.hidden = keys.length === 0;
      empty.hidden = keys.length !== 0;
      fillUsage(actions.call, keys, usageCells);
    } catch (failure) {
      show(listError, failure instanceof ApiError ? describe(failure) : "Loading keys failed.");
    } finally {
      loading.hidden = true;
    }
  }

  return { refresh, buttonsOf: (id) => buttonsOf.get(id), error: listError };
}
