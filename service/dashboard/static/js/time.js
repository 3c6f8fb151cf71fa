// Times as every page shows them, one convention everywhere: how long ago or from now ("3
// minutes ago", "in 90 days"), then the browser's own local date and time, and the exact UTC
// instant on hover. The API's times are UTC instants ("2025-01-31T12:34:56Z").

import { el } from "./dom.js";

// The words are the page's language, English: the browser's first English locale (so en-GB
// writes "31 Jan 2025, 18:04" and en-US "Jan 31, 2025, 6:04 PM"), else plain "en".
const LOCALE = [...(navigator.languages || []), "en"].find((tag) => /^en(-|$)/i.test(tag));
const RELATIVE = new Intl.RelativeTimeFormat(LOCALE, { numeric: "always" });
const NOW = new Intl.RelativeTimeFormat(LOCALE, { numeric: "auto" });
const LOCAL = new Intl.DateTimeFormat(LOCALE, { dateStyle: "medium", timeStyle: "short" });

const MINUTE = 60;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const YEAR = 365 * DAY;
// How often the shown "3 minutes ago" is brought up to date while the page stays open.
const REFRESH_MS = 30_000;

function parse(iso) {
  const date = typeof iso === "string" && /^\d{4}-\d\d-\d\dT/.test(iso) ? new Date(iso) : null;
  return date && !Number.isNaN(date.getTime()) ? date : null;
}

// "3 minutes ago", "in 90 days", "now": whole units, the largest that is at least one (days up
// to a year, so an expiry reads as the number of days it was given).
export function relative(date, now = Date.now()) {
  const seconds = (date.getTime() - now) / 1000;
  const size = Math.abs(seconds);
  const sign = Math.sign(seconds);
  if (Math.round(size / MINUTE) < 1) {
    return NOW.format(0, "second");
  }
  for (const [unit, length, next] of [
    ["minute", MINUTE, HOUR],
    ["hour", HOUR, DAY],
    ["day", DAY, YEAR + DAY],
  ]) {
    if (Math.round(size / length) * length < next) {
      return RELATIVE.format(sign * Math.round(size / length), unit);
    }
  }
  return RELATIVE.format(sign * Math.round(size / YEAR), "year");
}

// "2025-01-31 12:34:56 UTC": the exact instant, as the hover shows it.
export function utcText(date) {
  return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

// The API's instant `iso` as a <time>: "3 minutes ago" and, on a line of its own, the local date
// and time; the exact UTC instant in `datetime` and the tooltip. `never` stands in when there
// is no time; a value that is not an instant is shown as it came.
export function when(iso, never = "—") {
  const date = parse(iso);
  if (!date) {
    return document.createTextNode(typeof iso === "string" && iso ? iso : never);
  }
  keepFresh();
  const ago = el("span", { className: "ago", text: relative(date) });
  return el("time", { className: "when", attrs: { datetime: iso, title: utcText(date) } }, [
    ago,
    " ",
    el("span", { className: "local", text: LOCAL.format(date) }),
  ]);
}

// The same for a sentence: "31 Jan 2025, 18:04 (in 3 days)".
export function whenText(iso, never = "never") {
  const date = parse(iso);
  return date ? `${LOCAL.format(date)} (${relative(date)})` : never;
}

// Every shown time says how long ago it is as of now, not as of when it was drawn.
let ticking = false;
function keepFresh() {
  if (ticking) {
    return;
  }
  ticking = true;
  setInterval(() => {
    for (const time of document.querySelectorAll("time.when[datetime]")) {
      const date = parse(time.getAttribute("datetime"));
      const ago = time.querySelector(".ago");
      if (date && ago) {
        ago.textContent = relative(date);
      }
    }
  }, REFRESH_MS);
}
