// One audit event as a row of the activity table: when, what, by whom, from where, about
// what, and what changed. Keys, sessions, files and folders are named as the event recorded them (a
// key's name and prefix, a session's device, a file's name), by their type; an event recorded
// before names were kept, or of a shape this page does not know, falls back to its ids. A key or a
// session is a link to its own activity. Whatever shape a field comes in, it is shown as text.

import { activityHref } from "./address.js";
import { size } from "../bytes.js";
import { changesNode } from "./changes.js";
import { deviceNode } from "../devices.js";
import { el } from "../dom.js";
import { providerText } from "../sso.js";
import { cell } from "../table.js";
import { when } from "../time.js";

const text = (value) => typeof value === "string" && value !== "";

// "Key " and the id as code: what names a key, a session or a file that has no name here.
function byId(word, id) {
  return [`${word} `, el("code", { className: "id", text: String(id) })];
}

// A name as the event recorded it, in quotes.
function quoted(name) {
  return el("span", { className: "name", text: `“${name}”` });
}

// A key: “backup script” and its prefix; its id when the event has no name for it (recorded
// before names were kept, or an actor revoked before its event was written).
function keyNodes(key) {
  if (!text(key.name)) {
    return byId("Key", key.key_id);
  }
  const nodes = ["Key ", quoted(key.name)];
  if (text(key.key_prefix)) {
    nodes.push(" ", el("code", { text: key.key_prefix }));
  }
  return nodes;
}

// A session: the device it signed in from ("Chrome on Linux", the User-Agent on hover).
function sessionNodes(session) {
  if (!("device" in session)) {
    return byId("Session", session.session_id); // recorded before sessions were named
  }
  if (!text(session.device)) {
    return ["A session from an unknown device"];
  }
  return ["Session from ", deviceNode(session.device)];
}

function fileNodes(file) {
  if (!text(file.name)) {
    return byId("File", file.file_id);
  }
  const nodes = ["File ", quoted(file.name)];
  if (Number.isFinite(file.size)) {
    nodes.push(` (${size(file.size)})`);
  }
  return nodes;
}

function folderNodes(folder) {
  return text(folder.name) ? ["Folder ", quoted(folder.name)] : byId("Folder", folder.folder_id);
}

// An alias by its address (slug), as the event recorded it.
function aliasNodes(alias) {
  return text(alias.slug) ? ["Alias ", el("code", { text: `/a/${alias.slug}` })] : byId("Alias", alias.alias_id);
}

// `nodes` naming a key or a session, as a link to its own activity; as they are when that is the
// list shown (`naming`, the page's filter by key_id or session_id) or the event names no id.
function toActivity(nodes, name, id, naming) {
  if (!text(id) || naming[name] === id) {
    return nodes;
  }
  return [el("a", { className: "subject-activity", attrs: { href: activityHref(name, id) } }, nodes)];
}

// A key, session, file, folder, alias or the settings, by its type, or by the id it carries (older
// events have no type). `naming`: as for `toActivity`.
export function subjectNodes(subject, naming = {}) {
  if (subject.type === "api_key" || (!subject.type && subject.key_id)) {
    return toActivity(keyNodes(subject), "key_id", subject.key_id, naming);
  }
  if (subject.type === "session" || (!subject.type && subject.session_id)) {
    return toActivity(sessionNodes(subject), "session_id", subject.session_id, naming);
  }
  if (subject.type === "file" || (!subject.type && subject.file_id)) {
    return fileNodes(subject);
  }
  if (subject.type === "folder") {
    return folderNodes(subject);
  }
  if (subject.type === "alias") {
    return aliasNodes(subject);
  }
  if (subject.type === "identity") {
    const who = text(subject.email) ? [" ", el("span", { className: "name", text: subject.email })] : [];
    return [`Identity at ${providerText(subject.provider)}`, ...who];
  }
  if (subject.type === "settings") {
    return ["The account's settings"];
  }
  return null;
}

// Whatever else an object holds, field by field.
function fieldsText(value) {
  const entries = Object.entries(value);
  return entries.length ? entries.map(([name, item]) => `${name} ${changeText(item)}`).join(", ") : "—";
}

function actorNodes(actor, naming) {
  if (!actor || typeof actor !== "object") {
    return ["Not signed in"]; // a failed login: nobody was authenticated
  }
  if (actor.type === "cli") {
    return ["An operator (command line)"];
  }
  if (actor.type === "leak_report") {
    return [`A leak report from ${actor.ip || "an unknown address"}`];
  }
  return subjectNodes(actor, naming) || [text(actor.type) ? actor.type : fieldsText(actor)];
}

function targetNodes(target, naming) {
  if (!target || typeof target !== "object") {
    return ["—"];
  }
  return subjectNodes(target, naming) || [fieldsText(target)];
}

// A value of a shape this page does not know, as text.
function changeText(value) {
  if (value === null || value === undefined) {
    return "none";
  }
  if (Array.isArray(value)) {
    return value.length ? value.map((item) => (typeof item === "string" ? item : JSON.stringify(item))).join(", ") : "none";
  }
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

// The ways in an event can name: the password, a passkey, or the identity provider.
const SIGN_IN_WORDS = { password: "With the password", passkey: "With a passkey" };

// How a sign-in (or a step-up) was made, for an event that says: "With Authentik", "With the
// password"; null for any other event.
function signInNode(item) {
  const changes = item.changes && typeof item.changes === "object" && !Array.isArray(item.changes) ? item.changes : {};
  const method = item.method || changes.via;
  if (method === "oidc") {
    return el("span", { className: "hint event-method", text: `With ${providerText(item.provider || changes.provider)}` });
  }
  if (Object.hasOwn(SIGN_IN_WORDS, String(method))) {
    return el("span", { className: "hint event-method", text: SIGN_IN_WORDS[method] });
  }
  return null;
}

// `labels`: event type -> its name for people (the filter's); `folders`: the account's folders'
// paths by id, for the changes; `naming`: the key or session the list is filtered by, if any
// ({key_id} or {session_id}).
export function eventRow(item, labels, folders, naming = {}) {
  // One element per cell: on a narrow screen a cell is a grid of its label and its value.
  const box = (label, className, content) => cell(label, className, el("div", {}, content));
  const row = el("tr", { attrs: { tabindex: "-1" } }, [
    box("When", "event-when", [when(item.at)]),
    box("Event", "event-type", [
      el("span", { className: "event-label", text: labels.get(item.type) || String(item.type) }),
      el("code", { text: String(item.type) }),
      ...[signInNode(item)].filter(Boolean),
    ]),
    box("By", "event-actor", actorNodes(item.actor, naming)),
    box("Address", "event-ip", [el("code", { text: item.ip || "unknown" })]),
    // The User-Agent the request came with, by name, the whole string on hover.
    box("Device", "event-agent", [deviceNode(item.user_agent)]),
    box("Target", "event-target", targetNodes(item.target, naming)),
    box("Changes", "event-changes", [changesNode(item, folders)]),
  ]);
  row.dataset.eventId = item.id;
  row.dataset.eventType = item.type;
  return row;
}
