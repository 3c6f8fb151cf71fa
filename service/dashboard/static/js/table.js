// The pieces every list's rows are made of.

import { el } from "./dom.js";

// A cell with its column's name in data-label: on a narrow screen the style sheet shows each
// row as a card, the name before the value. `content` is a node or a list of them.
export function cell(label, className, content) {
  return el(
    "td",
    { className, attrs: { "data-label": label } },
    Array.isArray(content) ? content : [content],
  );
}

// A row's button, "Delete" say, that also names what it acts on (" report.pdf", visually
// hidden) for a screen reader's list of buttons, where every row's would read alike.
export function rowButton(text, className, about) {
  return el("button", { text, className, attrs: { type: "button" } }, [
    el("span", { text: about, className: "visually-hidden" }),
  ]);
}
