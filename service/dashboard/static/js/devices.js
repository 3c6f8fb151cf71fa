// A device as people know it: "Chrome on Linux" from its User-Agent, the full string on hover.
// A small, honest reading of the common browsers and systems: anything else (a script's
// "curl/8.5.0", a string made up) is shown as it came, shortened.

import { el } from "./dom.js";

const SHORT = 60; // characters of an unknown User-Agent shown before "…"

// The first that matches names the browser: those built on Chrome or Safari say so too, so they
// come before them (Edge's "Edg/", Opera's "OPR/" sit beside "Chrome/"; on iOS every browser is
// Safari's engine and names itself with its own token).
const BROWSERS = [
  [/\bEdg(e|A|iOS)?\//, "Edge"],
  [/\b(OPR|OPT|Opera)\//, "Opera"],
  [/\bSamsungBrowser\//, "Samsung Internet"],
  [/\bVivaldi\//, "Vivaldi"],
  [/\bYaBrowser\//, "Yandex Browser"],
  [/\b(Firefox|FxiOS)\//, "Firefox"],
  [/\bHeadlessChrome\//, "Headless Chrome"],
  [/\b(Chrome|CriOS)\//, "Chrome"],
  [/\bChromium\//, "Chromium"],
  [/\bVersion\/[\d.]+.*\bSafari\//, "Safari"],
];

// Android and ChromeOS say "Linux" too, and iPads "like Mac OS X": the specific ones first.
const SYSTEMS = [
  [/\bWindows (NT|Phone)\b/, "Windows"],
  [/\bAndroid\b/, "Android"],
  [/\biPad\b/, "iPadOS"],
  [/\b(iPhone|iPod)\b/, "iOS"],
  [/\bCrOS\b/, "ChromeOS"],
  [/\b(Macintosh|Mac OS X)\b/, "macOS"],
  [/\bFreeBSD\b/, "FreeBSD"],
  [/\b(Linux|X11)\b/, "Linux"],
];

function first(table, text) {
  const found = table.find(([pattern]) => pattern.test(text));
  return found ? found[1] : null;
}

// "Chrome on Linux", "Firefox" (no system named), or null when no browser is recognised. Only
// what looks like a browser's string is read: it starts "Mozilla/5.0".
export function deviceName(agent) {
  if (typeof agent !== "string" || !agent.startsWith("Mozilla/5.0")) {
    return null;
  }
  const browser = first(BROWSERS, agent);
  if (!browser) {
    return null;
  }
  const system = first(SYSTEMS, agent);
  return system ? `${browser} on ${system}` : browser;
}

// What a list shows for a User-Agent: its name, or the string itself cut to SHORT characters.
export function deviceText(agent) {
  if (typeof agent !== "string" || !agent) {
    return "Unknown device";
  }
  const named = deviceName(agent);
  if (named) {
    return named;
  }
  return agent.length > SHORT ? `${agent.slice(0, SHORT - 1)}…` : agent;
}

// The same as an element, the whole User-Agent in its tooltip. Text only, whatever it holds.
export function deviceNode(agent, className = "device-name") {
  const node = el("span", { className, text: deviceText(agent) });
  if (typeof agent === "string" && agent) {
    node.title = agent;
  }
  return node;
}
