// What each key did over the last 30 days (GET /keys/{id}/usage): a small bar chart of its
// requests per day with the refused part of each day over it, the totals in words, where it
// was last used from, and a mark on a key nobody used for 30 days: it can be revoked safely.
// The chart is SVG made element by element (the pages' policy refuses HTML strings).

import { number } from "../bytes.js";
import { el } from "../dom.js";
import { when } from "../time.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const BAR = 3; // each day's bar, then a gap of one
const STEP = 4;
const HEIGHT = 28;
const DAY_MS = 24 * 60 * 60 * 1000;
const IDLE_DAYS = 30;
// Usage is asked for this many keys at a time: the session has a rate too.
const AT_ONCE = 4;

function svg(name, attributes, children = []) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [attribute, value] of Object.entries(attributes)) {
    node.setAttribute(attribute, String(value));
  }
  node.append(...children);
  return node;
}

function plural(count, word) {
  return `${number(count)} ${word}${count === 1 ? "" : "s"}`;
}

function sum(days, field) {
  return days.reduce((total, day) => total + day[field], 0);
}

// The totals of the days, in words: "1,204 requests, 3 refused".
export function totalsText(days) {
  return `${plural(sum(days, "requests"), "request")}, ${number(sum(days, "refused"))} refused`;
}

// The chart of `days` (oldest first): a bar per day as tall as its requests against the
// busiest day's, its refused part drawn over its foot; each bar says its day on hover.
export function usageChart(days) {
  const busiest = Math.max(1, ...days.map((day) => day.requests));
  const width = days.length * STEP - (STEP - BAR);
  const bars = [];
  days.forEach((day, index) => {
    const x = index * STEP;
    const tall = day.requests ? Math.max(2, Math.round((day.requests / busiest) * HEIGHT)) : 0;
    const label = `${day.date}: ${plural(day.requests, "request")}, ${day.refused} refused`;
    const parts = [svg("title", {}, [label])];
    // Every day has a bar to hover, a faint one when nothing came.
    parts.push(
      svg("rect", {
        x,
        y: 0,
        width: BAR,
        height: HEIGHT,
        class: "usage-slot",
      }),
    );
    if (tall) {
      parts.push(svg("rect", { x, y: HEIGHT - tall, width: BAR, height: tall, class: "usage-requests" }));
    }
    if (day.refused) {
      const refused = Math.max(2, Math.round((day.refused / busiest) * HEIGHT));
      parts.push(svg("rect", { x, y: HEIGHT - refused, width: BAR, height: refused, class: "usage-refused" }));
    }
    bars.push(svg("g", { class: "usage-day", "data-date": day.date }, parts));
  });
  return svg(
    "svg",
    {
      class: "usage-chart",
      viewBox: `0 0 ${width} ${HEIGHT}`,
      width,
      height: HEIGHT,
      role: "img",
      "aria-label": `Requests per day for the last ${days.length} days: ${totalsText(days)}`,
    },
    bars,
  );
}

// Whether nothing used the key for 30 days: none in the days shown, none since, and the key is
// at least that old (a new key is unused, not idle).
export function isIdle(key, usage, now = Date.now()) {
  const since = now - IDLE_DAYS * DAY_MS;
  const used = usage.last_used_at ? Date.parse(usage.last_used_at) : null;
  return (
    usage.days.every((day) => day.requests === 0) &&
    (used === null || used < since) &&
    Date.parse(key.created_at) < since
  );
}

// The cell's content once the key's usage is known.
export function usageNodes(key, usage, now = Date.now()) {
  const nodes = [
    usageChart(usage.days),
    el("p", { className: "usage-totals" }, [
      "30 days: ",
      el("span", { className: "usage-key usage-key-requests", attrs: { "aria-hidden": "true" } }),
      `${plural(sum(usage.days, "requests"), "request")}, `,
      el("span", { className: "usage-key usage-key-refused", attrs: { "aria-hidden": "true" } }),
      `${number(sum(usage.days, "refused"))} refused`,
    ]),
  ];
  if (isIdle(key, usage, now)) {
    nodes.push(
      el("span", {
        className: "badge is-idle",
        text: "Idle 30 days: safe to revoke",
        attrs: { title: "No request used this key in the last 30 days" },
      }),
    );
  }
  return nodes;
}

// Fills in each key's 30 days (and the address of its last use) as its usage arrives, a few
// keys at a time; a key whose usage cannot be read says so in its place. `cells`: key id ->
// {usage, lastUse}, the elements of its row that show them.
export async function fillUsage(call, keys, cells) {
  const waiting = [...keys];
  async function next() {
    for (let key = waiting.shift(); key; key = waiting.shift()) {
      const { usage: holder, lastUse } = cells.get(key.id);
      try {
        const usage = await call("GET", `/keys/${encodeURIComponent(key.id)}/usage`);
        holder.replaceChildren(...usageNodes(key, usage));
        // The usage's last use is the list's, or a later one its flush has seen since.
        lastUse.replaceChildren(when(usage.last_used_at || key.last_used_at, "Never"));
        if (usage.last_used_ip) {
          lastUse.append(
            el("span", { className: "last-address" }, ["from ", el("code", { text: usage.last_used_ip })]),
          );
        }
      } catch {
        holder.replaceChildren(el("span", { className: "hint", text: "30 days: not available" }));
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(AT_ONCE, waiting.length) }, next));
}
