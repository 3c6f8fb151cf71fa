// The activity page (/activity): the account's audit trail, newest first, a page at a time,
// filtered by event type. `/activity?type=key.created` opens filtered; `?limit=N` sets the
// page size.

import { failedText } from "../api.js";
import { sessionCaller } from "../caller.js";
import { eventRow } from "../activity/events.js";
import { byId, hide, show } from "../dom.js";
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

function listElements() {
  return {
    filter: byId("activity-type"),
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
    const rows = (Array.isArray(data.events) ? data.events : []).map((item) => eventRow(item, labels, paths));
    nextCursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
    list.tbody.append(...rows);
    const count = list.tbody.children.length;
    list.table.hidden = count === 0;
    if (count === 0) {
      const label = labels.get(list.filter.value);
      show(list.empty, label ? `No “${label}” activity yet.` : "No activity yet.");
    }
    list.more.hidden = nextCursor === null;
    if (!fromStart && rows.length) {
      rows[0].focus(); // the first of the new rows, so a keyboard user reads on from there
    }
  }

  // The first page of the chosen type (from scratch), or the next page after the last one.
  async function load(fromStart) {
    const ticket = ++generation;
    const query = new URLSearchParams({ limit: String(limit) });
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
