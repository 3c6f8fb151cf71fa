// What an event changed, in words: one line per field, "name: backup → nightly",
// "permissions: + files.write, − files.read", "moved to: Projects / 2025", never a field's raw
// name or JSON. A folder is named by its path (the account's folders, looked up once by the
// page); one deleted since is said so. A field this page does not know is named in words from
// its own name, its value as text.

import { el } from "../dom.js";
import { providerText } from "../sso.js";
import { when } from "../time.js";

const text = (value) => typeof value === "string" && value !== "";

const WORDS = {
  name: "name",
  permissions: "permissions",
  expires_at: "expires",
  allowed_ips: "allowed from",
  rate_limit: "rate limit",
  folder_ids: "folders",
  uploader: "made for",
  grace_seconds: "old secret works for",
  previous_secret_expires_at: "old secret until",
  key_prefix: "new prefix",
  revoked_reason: "why",
  reason: "why",
  folder_id: "moved to",
  parent_id: "moved to",
  recursive: "with what it held",
  slug: "address",
  max_views: "view limit",
  password_protected: "password",
  password_changed: "password",
  enabled: "enabled",
  sessions_ended: "sessions ended",
  method: "second factor",
  via: "signed in with",
  provider: "identity provider",
  aal: "assurance level",
  default_key_expires_days: "new keys expire after",
  default_folder_id: "uploads go to",
  default_alias_expires_in_seconds: "new aliases expire after",
  default_alias_max_views: "new aliases' view limit",
  public_aliases_enabled: "public aliases",
};

const REASONS = {
  reported_leaked: "reported leaked",
  target_deleted: "what it linked to was deleted",
};

const UPLOADERS = { sharex: "ShareX", curl: "a curl script" };

// A new folder's parent is where it was made ("in"), not where it went ("moved to").
const ON_CREATION = { parent_id: "in" };

function fieldWords(field, type) {
  if (type === "folder.created" && Object.hasOwn(ON_CREATION, field)) {
    return ON_CREATION[field];
  }
  return Object.hasOwn(WORDS, field) ? WORDS[field] : field.replaceAll("_", " ");
}

function plural(count, one) {
  return `${count} ${one}${count === 1 ? "" : "s"}`;
}

function seconds(value) {
  for (const [size, unit] of [
    [86400, "day"],
    [3600, "hour"],
    [60, "minute"],
  ]) {
    if (value >= size && value % size === 0) {
      return plural(value / size, unit);
    }
  }
  return plural(value, "second");
}

// `folders`: Map id -> path. null is the top level.
function folderText(id, folders) {
  if (id === null || id === undefined) {
    return "the top level";
  }
  return folders.has(id) ? folders.get(id) : "a folder deleted since";
}

// Any value as plain words: lists joined, yes and no, objects field by field.
function plain(value) {
  if (value === null || value === undefined) {
    return "none";
  }
  if (typeof value === "boolean") {
    return value ? "yes" : "no";
  }
  if (Array.isArray(value)) {
    return value.length ? value.map(plain).join(", ") : "none";
  }
  if (typeof value === "object") {
    const entries = Object.entries(value);
    return entries.length ? entries.map(([name, item]) => `${fieldWords(name, "")} ${plain(item)}`).join(", ") : "none";
  }
  return String(value);
}

const viewsText = (value) => (Number.isInteger(value) ? plural(value, "view") : "no limit");
const onOff = (value) => (value ? "on" : "off");
const lengthText = (value) => (Number.isInteger(value) ? (value === 0 ? "no time" : seconds(value)) : "never");
const timeNode = (value) => (text(value) ? when(value) : "never");
const folderValue = (value, item, folders) => folderText(value, folders);
const reasonText = (value) => REASONS[value] || plain(value);

// Each known field's new value as nodes (for a name, the old one first when the event has it):
// `(value, item, folders)`. Keyed by the field's name.
// The ways in and second factors an event names, in words.
const WAYS = { oidc: "single sign-on", password: "the password", provider: "the identity provider's own" };

const VALUES = {
  via: (value) => [WAYS[value] || plain(value)],
  provider: (value) => [providerText(value)],
  method: (value) => [Object.hasOwn(WAYS, value) ? WAYS[value] : plain(value)],
  name(value, item) {
    const target = item.target && typeof item.target === "object" ? item.target : {};
    return text(target.name) && text(value) && target.name !== value ? [target.name, " → ", value] : [plain(value)];
  },
  folder_id: folderValue,
  parent_id: folderValue,
  default_folder_id: (value, item, folders) => [value === null ? "your choice each time" : folderText(value, folders)],
  folder_ids: (value, item, folders) => [
    Array.isArray(value) ? value.map((id) => folderText(id, folders)).join(", ") : "every folder",
  ],
  allowed_ips: (value) => [Array.isArray(value) && value.length ? value.join(", ") : "anywhere"],
  rate_limit: (value) => [
    value && typeof value === "object" ? `${value.per_second} a second, bursts of ${value.burst}` : "the service's default",
  ],
  max_views: (value) => [viewsText(value)],
  default_alias_max_views: (value) => [viewsText(value)],
  password_protected: (value) => [value ? "set" : "removed"],
  password_changed: () => ["changed"],
  enabled: (value) => [onOff(value)],
  public_aliases_enabled: (value) => [onOff(value)],
  grace_seconds: (value) => [lengthText(value)],
  default_alias_expires_in_seconds: (value) => [lengthText(value)],
  default_key_expires_days: (value) => [Number.isInteger(value) ? plural(value, "day") : "90 days (the service's default)"],
  revoked_reason: (value) => [reasonText(value)],
  reason: (value) => [reasonText(value)],
  uploader: (value) => [UPLOADERS[value] || plain(value)],
  slug: (value) => [el("code", { text: `/a/${value}` })],
  expires_at: (value) => [timeNode(value)],
  previous_secret_expires_at: (value) => [timeNode(value)],
};

function valueNodes(field, value, item, folders) {
  if (Object.hasOwn(VALUES, field)) {
    return VALUES[field](value, item, folders);
  }
  return [field.endsWith("_at") && text(value) ? when(value) : plain(value)];
}

// "+ files.write, − files.read" from what an edit gave and took.
function permissionChange(changes) {
  const added = Array.isArray(changes.permissions_added) ? changes.permissions_added : [];
  const removed = Array.isArray(changes.permissions_removed) ? changes.permissions_removed : [];
  // A no-break space: a sign stays with its permission when the line wraps.
  return [...added.map((name) => `+\u00a0${name}`), ...removed.map((name) => `−\u00a0${name}`)].join(", ") || "none";
}

// `item`: the event; `folders`: Map id -> path.
export function changesNode(item, folders) {
  const changes = item.changes;
  if (!changes || typeof changes !== "object" || Array.isArray(changes)) {
    return document.createTextNode("—");
  }
  const lines = [];
  // What an edit gave and took (permissions_added, permissions_removed) is said with the list.
  const told = Array.isArray(changes.permissions_added) || Array.isArray(changes.permissions_removed);
  for (const [field, value] of Object.entries(changes)) {
    if (field.startsWith("permissions_")) {
      continue;
    }
    const nodes = field === "permissions" && told ? [permissionChange(changes)] : valueNodes(field, value, item, folders);
    lines.push(el("li", {}, [el("span", { className: "change-field", text: `${fieldWords(field, item.type)}: ` }), ...nodes]));
  }
  return lines.length ? el("ul", { className: "changes" }, lines) : document.createTextNode("—");
}
