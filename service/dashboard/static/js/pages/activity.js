// The activity page (/activity): the account's audit trail, newest first, a page at a time,
// filtered by event type. `/activity?type=key.created` opens filtered; `?limit=N` sets the
// page size; `?key_id=key_…` or `?session_id=ses_…` keeps the events of one key or one session
// (the keys' and sessions' pages link there, as do the keys and sessions named in the list).

import { failedText } from "../api.js";
import { sessionCaller } from "../caller.js";
import { eventRow, subjectNodes } from "../activity/events.js";
import { byId, el, hide, show } from "../dom.js";
import { folderTree } from "../folders.js";
import { signedInFrame } from "../layout.js";
import { requireSession } from "../session.js";
import { signInMethods } from "../sso.js";

const PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 1000; // the API's own bound on `limit`

// `/activity?limit=N` asks for pages of N events (1 to 1000, as the API allows); anything else
// is the default.
function pageSize() {
  const raw = new URLSearchParams(window.location.search).get("limit") || "";
  const value = /^\d{1,4}$/.test(raw) ? Number(raw) : 0;
  return value >= 1 && value <= MAX_PAGE_SIZE ? value : PAGE_SIZE;
}

// The key or session the address asks for (`?key_id=`, `?session_id=`, ids as the API gives
// them), as the API's filter: {key_id} or {session_id} (a key when it names both); {} when it
// asks for neither, or for something that is no such id.
const SUBJECTS = { key_id: /^key_[0-9A-Za-z]{22}$/, session_id: /^ses_[0-9A-Za-z]{22}$/ };
// How the list names what it is filtered by, before an event has named it.
const SUBJECT_WORDS = { key_id: "key", session_id: "session" };

function askedNaming() {
  const query = new URLSearchParams(window.location.search);
  const naming = {};
  for (const [name, shape] of Object.entries(SUBJECTS)) {
    const value = query.get(name) || "";
    if (shape.test(value)) {
      naming[name] = value;
      break;
    }
  }
  return naming;
}

// The key or session `naming` asks for, as the first of `events` that names it recorded it.
function namedIn(events, naming) {
  const [name, id] = Object.entries(naming)[0];
  for (const item of events) {
    for (const subject of [item.actor, item.target]) {
      if (subject && typeof subject === "object" && subject[name] === id) {
        return subject;
      }
    }
  }
  return null;
}

// "Showing only: Key “deploy bot” fhk_… · Show all activity": what the list is filtered by (by
// its name once an event shows it, else its kind and id), and the way back to every event.
function showScope(scope, naming, subject) {
  const [name, id] = Object.entries(naming)[0];
  const nodes = subject ? subjectNodes(subject, naming) : [`The ${SUBJECT_WORDS[name]} `, el("code", { text: id })];
  const everything = new URL(window.location.href);
  everything.searchParams.delete("key_id");
  everything.searchParams.delete("session_id");
  scope.replaceChildren(
    el("span", { className: "hint", text: "Showing only: " }),
    el("span", { className: "scope-subject" }, nodes),
    " · ",
    el("a", { attrs: { href: everything.pathname + everything.search }, text: "Show all activity" }),
  );
  scope.hidden = false;
}

function listElements() {
  return {
    filter: byId("activity-type"),
    scope: byId("activity-scope"),
    table: byId("activity-table"),
    tbody: byId("activity-body"),
    loading: byId("activity-loading"),
    empty: byId("activity-empty"),
    error: byId("activity-error"),
    more: byId("activity-more"),
  };
}

// The list as it stands before the first page of a new filter arrives.
function clear(list) {
  list.tbody.replaceChildren();
  list.table.hidden = true;
  hide(list.empty);
  list.more.hidden = true;
  list.loading.hidden = false;
}

function start(session) {
  const call = sessionCaller(session.token);
  signedInFrame("activity", session, { call });
  const limit = pageSize();
  const list = listElements();
  // The event types' names are the filter's: one list, in the page.
  const labels = new Map(
    Array.from(list.filter.options)
      .filter((option) => option.value)
      .map((option) => [option.value, option.textContent.trim()]),
  );
  let nextCursor = null;
  let generation = 0; // a filter change makes the answers to earlier requests stale
  const naming = askedNaming();
  const narrowed = Object.keys(naming).length > 0;
  let subjectNamed = false; // an event has named the key or session the list is of
  if (narrowed) {
    showScope(list.scope, naming, null);
  }

  const asked = new URLSearchParams(window.location.search).get("type");
  if (asked && labels.has(asked)) {
    list.filter.value = asked;
  }

  // The account's folders by id, once: the changes name a folder by its path. Without them
  // (refused, or failed), a folder reads as one deleted since.
  const folders = folderTree(call).then(
    (tree) => new Map(tree.folders.map((folder) => [folder.id, folder.path])),
    () => new Map(),
  );

  // The rows of a page that arrived, after those shown.
  function showPage(data, fromStart, paths) {
    const events = Array.isArray(data.events) ? data.events : [];
    const rows = events.map((item) => eventRow(item, labels, paths, naming));
    if (narrowed && !subjectNamed) {
      const subject = namedIn(events, naming);
      if (subject) {
        subjectNamed = true;
        showScope(list.scope, naming, subject);
      }
    }
    nextCursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
    list.tbody.append(...rows);
    const count = list.tbody.children.length;
    list.table.hidden = count === 0;
    if (count === 0) {
      const label = labels.get(list.filter.value);
      const of = narrowed ? ` of this ${SUBJECT_WORDS[Object.keys(naming)[0]]}` : "";
      show(list.empty, label ? `No “${label}” activity${of} yet.` : `No activity${of} yet.`);
    }
    list.more.hidden = nextCursor === null;
    if (!fromStart && rows.length) {
      rows[0].focus(); // the first of the new rows, so a keyboard user reads on from there
    }
  }

  // The first page of the chosen type (from scratch), or the next page after the last one.
  async function load(fromStart) {
    const ticket = ++generation;
    const query = new URLSearchParams({ limit: String(limit), ...naming });
    if (list.filter.value) {
      query.set("type", list.filter.value);
    }
    if (fromStart) {
      nextCursor = null;
      clear(list);
    } else if (nextCursor !== null) {
      query.set("cursor", nextCursor);
    }
    hide(list.error);
    list.more.disabled = true;
    try {
      // The provider's name (GET /auth/methods) before a sign-in through it is shown.
      const [data, paths] = await Promise.all([call("GET", `/audit-events?${query}`), folders, signInMethods()]);
      if (ticket === generation) {
        showPage(data, fromStart, paths);
      }
    } catch (failure) {
      if (ticket === generation) {
        show(list.error, failedText("Loading the activity", failure));
        list.more.hidden = nextCursor === null; // "Load more" tries the same page again
      }
    } finally {
      if (ticket === generation) {
        list.loading.hidden = true;
        list.more.disabled = false;
      }
    }
  }

  list.filter.addEventListener("change", () => {
    // The address keeps the filter, so a reload or a shared link shows the same list.
    const url = new URL(window.location.href);
    if (list.filter.value) {
      url.searchParams.set("type", list.filter.value);
    } else {
      url.searchParams.delete("type");
    }
    window.history.replaceState(null, "", url);
    load(true);
  });
  list.more.addEventListener("click", () => load(false));

  load(true);
}

const session = requireSession("Sign in to see your account's activity.");
if (session) {
  start(session);
}
