// Times as the pages show them. The API's are UTC instants ("2025-01-31T12:34:56Z").

import { el } from "./dom.js";

// "2025-01-31T12:34:56Z" -> "2025-01-31 12:34 UTC": unambiguous, and the same everywhere.
// `never` stands in when there is no time.
export function when(iso, never) {
  if (!iso) {
    return document.createTextNode(never);
  }
  const text = /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(iso)
    ? `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`
    : iso;
  return el("time", { text, attrs: { datetime: iso } });
}

// The same, as text for a sentence.
export function whenText(iso) {
  return when(iso, "never").textContent;
}

function twoDigits(number) {
  return String(number).padStart(2, "0");
}

// "2025-01-31T12:34:56Z" -> "2025-01-31 18:04:56 UTC+05:30": the browser's own time zone,
// named by its offset, with the exact instant (UTC) in `datetime` and the tooltip.
export function localTime(iso) {
  const date = typeof iso === "string" ? new Date(iso) : new Date(Number.NaN);
  if (Number.isNaN(date.getTime())) {
    return document.createTextNode(typeof iso === "string" && iso ? iso : "—");
  }
  const offset = -date.getTimezoneOffset();
  const zone =
    offset === 0
      ? "UTC"
      : `UTC${offset < 0 ? "-" : "+"}${twoDigits(Math.floor(Math.abs(offset) / 60))}:${twoDigits(Math.abs(offset) % 60)}`;
  const text =
    `${date.getFullYear()}-${twoDigits(date.getMonth() + 1)}-${twoDigits(date.getDate())} ` +
    `${twoDigits(date.getHours())}:${twoDigits(date.getMinutes())}:${twoDigits(date.getSeconds())} ${zone}`;
  return el("time", { text, attrs: { datetime: iso, title: iso } });
}
