// One audit event as a row of the activity table: when, what, by whom, from where, about
// what, and what changed. Whatever shape a field comes in, it is shown as text.

import { el } from "../dom.js";
import { cell } from "../table.js";
import { localTime } from "../time.js";

// A "Session ses_…" or "Key key_…" kind of reference: a word and the id as code.
function reference(word, id) {
  return [`${word} `, el("code", { className: "id", text: String(id) })];
}

function actorNodes(actor) {
  if (!actor || typeof actor !== "object") {
    return ["Not signed in"]; // a failed login: nobody was authenticated
  }
  if (actor.type === "session" && actor.session_id) {
    return reference("Session", actor.session_id);
  }
  if (actor.type === "cli") {
    return ["An operator (command line)"];
  }
  if (actor.type === "leak_report") {
    return [`A leak report from ${actor.ip || "an unknown address"}`];
  }
  return [typeof actor.type === "string" ? actor.type : "Unknown"];
}

function targetNodes(target) {
  if (!target || typeof target !== "object") {
    return ["—"];
  }
  if (target.key_id) {
    return reference("Key", target.key_id);
  }
  if (target.session_id) {
    return reference("Session", target.session_id);
  }
  const entries = Object.entries(target);
  return entries.length ? [entries.map(([name, value]) => `${name} ${changeText(value)}`).join(", ")] : ["—"];
}

// One changed field's new value, as text whatever its shape.
function changeText(value) {
  if (value === null || value === undefined) {
    return "none";
  }
  if (Array.isArray(value)) {
    return value.length ? value.map((item) => (typeof item === "string" ? item : JSON.stringify(item))).join(", ") : "none";
  }
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

// What changed, field by field, whatever the fields are: a list of names and new values (a
// time, a field named *_at, in local time like the event's own).
function changesNode(changes) {
  if (!changes || typeof changes !== "object" || Array.isArray(changes)) {
    return document.createTextNode("—");
  }
  const entries = Object.entries(changes);
  if (!entries.length) {
    return document.createTextNode("—");
  }
  return el(
    "dl",
    { className: "changes" },
    entries.flatMap(([name, value]) => [
      el("dt", { text: name }),
      el("dd", {}, [name.endsWith("_at") && typeof value === "string" ? localTime(value) : changeText(value)]),
    ]),
  );
}

// `labels`: event type -> its name for people (the filter's).
export function eventRow(item, labels) {
  // One element per cell: on a narrow screen a cell is a grid of its label and its value.
  const box = (label, className, content) => cell(label, className, el("div", {}, content));
  const agent = typeof item.user_agent === "string" && item.user_agent ? item.user_agent : "Unknown device";
  const row = el("tr", { attrs: { tabindex: "-1" } }, [
    box("When", "event-when", [localTime(item.at)]),
    box("Event", "event-type", [
      el("span", { className: "event-label", text: labels.get(item.type) || String(item.type) }),
      el("code", { text: String(item.type) }),
    ]),
    box("By", "event-actor", actorNodes(item.actor)),
    box("Address", "event-ip", [el("code", { text: item.ip || "unknown" })]),
    // The User-Agent as the client sent it, shown as text only.
    box("Device", "event-agent", [el("span", { className: "user-agent", text: agent })]),
    box("Target", "event-target", targetNodes(item.target)),
    box("Changes", "event-changes", [changesNode(item.changes)]),
  ]);
  row.dataset.eventId = item.id;
  row.dataset.eventType = item.type;
  return row;
}
