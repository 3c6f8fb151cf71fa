// What an edit of a key changes, worked out from the form as typed: the PATCH body (only the
// fields that differ from the key as listed) and, in words for the confirmation, what of it
// refuses requests that work now. No page state here: the edit panel reads its fields into
// `form` and decides what to do with the answer.

import { whenText } from "../time.js";

export function rateText(rate) {
  return rate ? `${rate.per_second} per second, burst ${rate.burst}` : "the service's default";
}

function sameRate(a, b) {
  if (!a || !b) {
    return !a && !b;
  }
  return a.per_second === b.per_second && a.burst === b.burst;
}

// The allow-list as typed: one entry per line, or separated by commas (or spaces).
function addressList(text) {
  return text.split(/[\s,]+/).filter((item) => item !== "");
}

// Only to compare with the stored list (which the server writes with a prefix length): a
// plain address is its own network. Whatever is sent is what was typed.
function asNetwork(entry) {
  if (entry.includes("/")) {
    return entry.toLowerCase();
  }
  return `${entry.toLowerCase()}/${entry.includes(":") ? 128 : 32}`;
}

// A whole number as typed ("20" -> 20); anything else is sent as typed, so that the server
// refuses it in its own words.
function wholeNumber(text) {
  const trimmed = text.trim();
  return /^\d{1,9}$/.test(trimmed) ? Number(trimmed) : trimmed;
}

function permissionChanges(key, chosen, body, cuts) {
  const before = key.permissions || [];
  if (chosen.length === before.length && chosen.every((permission) => before.includes(permission))) {
    return;
  }
  body.permissions = chosen;
  const removed = before.filter((permission) => !chosen.includes(permission));
  if (removed.length && chosen.length) {
    cuts.push(
      `It loses ${removed.length === 1 ? "the permission" : "the permissions"} ` +
        `${removed.join(", ")}: requests that need ${removed.length === 1 ? "it" : "them"} are refused.`,
    );
  }
}

function expiryChanges(key, typed, body, cuts) {
  if (typed.trim() === "") {
    return;
  }
  body.expires_days = wholeNumber(typed);
  if (typeof body.expires_days === "number") {
    const days = body.expires_days;
    cuts.push(
      `It expires ${days} ${days === 1 ? "day" : "days"} from now, ` +
        `${key.expires_at ? `instead of ${whenText(key.expires_at)}` : "where it never expired"}; ` +
        "it is refused after that.",
    );
  }
}

function addressChanges(key, typed, body, cuts) {
  const entries = addressList(typed);
  const held = Array.isArray(key.allowed_ips) ? key.allowed_ips : [];
  const wanted = entries.map(asNetwork);
  if (wanted.length === held.length && wanted.every((network, index) => network === held[index])) {
    return;
  }
  body.allowed_ips = entries;
  const dropped = held.filter((network) => !wanted.includes(network));
  if (entries.length && !held.length) {
    cuts.push(
      `It may be used only from ${entries.join(", ")}, no longer from anywhere: ` +
        "requests from any other address are refused.",
    );
  } else if (entries.length && dropped.length) {
    cuts.push(`It may no longer be used from ${dropped.join(", ")}: requests from there are refused.`);
  }
}

function rateChanges(key, typed, body, cuts) {
  const rate = typed.own
    ? { per_second: wholeNumber(typed.perSecond), burst: wholeNumber(typed.burst) }
    : null;
  const current = key.rate_limit || null;
  if (sameRate(rate, current)) {
    return;
  }
  body.rate_limit = rate;
  const numbers = !rate || (typeof rate.per_second === "number" && typeof rate.burst === "number");
  // The service's default rate is not known here: a change to or from it may lower it.
  const lower = !rate || !current || rate.per_second < current.per_second || rate.burst < current.burst;
  if (numbers && lower) {
    cuts.push(
      `Its rate limit becomes ${rateText(rate)} (until now ${rateText(current)}): ` +
        "requests over it are refused.",
    );
  }
}

// The folders a key reaches: null (the whole account) or ids. `pathOf(id)` names one.
function folderChanges(key, chosen, pathOf, body, cuts) {
  const before = Array.isArray(key.folder_ids) ? key.folder_ids : null;
  const same =
    chosen === null || before === null
      ? chosen === before
      : chosen.length === before.length && chosen.every((id) => before.includes(id));
  if (same) {
    return;
  }
  body.folder_ids = chosen;
  const named = (ids) => ids.map((id) => pathOf(id) || id).join(", ");
  if (chosen === null) {
    return; // the whole account again: nothing that works now is refused
  }
  if (before === null) {
    cuts.push(
      `It reaches only ${named(chosen)}: everything else (the top level, other folders, the ` +
        "settings) is refused.",
    );
    return;
  }
  const dropped = before.filter((id) => !chosen.includes(id));
  if (dropped.length) {
    cuts.push(`It no longer reaches ${named(dropped)}: requests for anything in ${dropped.length === 1 ? "it" : "them"} are refused.`);
  }
}

// `form`: {name, permissions (the checked names, in order), expiry, ips, rate: {own,
// perSecond, burst}, folders (null or ids), pathOf(id)}, each text as typed. Returns {body,
// cuts}.
export function editChanges(key, form) {
  const body = {};
  const cuts = [];
  const name = form.name.trim();
  if (name !== key.name) {
    body.name = name;
  }
  permissionChanges(key, form.permissions, body, cuts);
  expiryChanges(key, form.expiry, body, cuts);
  addressChanges(key, form.ips, body, cuts);
  rateChanges(key, form.rate, body, cuts);
  if (form.folders !== undefined) {
    folderChanges(key, form.folders, form.pathOf || (() => null), body, cuts);
  }
  return { body, cuts };
}
