// What the account holds against the service's limits (GET /usage), on the settings page: its
// files (how many of the most it may hold, their bytes, and by kind), folders, public links and
// API keys, each with a meter, so a limit is seen coming before an upload is refused with it.

import { failedText } from "../api.js";
import { number, size } from "../bytes.js";
import { byId, el, hide, show } from "../dom.js";
import { cell } from "../table.js";

// The kinds of files, as the files page's Type filter names them, in its order.
const KINDS = [
  ["image", "images"],
  ["video", "videos"],
  ["audio", "audio"],
  ["text", "text"],
  ["pdf", "PDF"],
  ["other", "other"],
];


// "312 of 10,000" with its meter, for a count and its most.
function heldNodes(what, held) {
  const meter = el("meter", {
    attrs: { min: "0", max: String(held.max), value: String(Math.min(held.count, held.max)), "aria-label": what },
  });
  // Near the most: said in words as well as by the meter's colour.
  meter.setAttribute("high", String(Math.floor(held.max * 0.9)));
  meter.setAttribute("optimum", "0");
  const words = el("span", { className: "usage-count", text: `${number(held.count)} of ${number(held.max)}` });
  const nodes = [words, meter];
  if (held.count >= held.max) {
    nodes.push(el("span", { className: "badge is-off", text: "Full" }));
  }
  return nodes;
}

// "4.2 GiB in all, up to 100 MiB a file; images 250 (860 MiB), videos 12 (3.3 GiB)".
function filesNote(files) {
  const kinds = KINDS.filter(([kind]) => files.by_type[kind] && files.by_type[kind].count > 0).map(
    ([kind, name]) => `${name} ${number(files.by_type[kind].count)} (${size(files.by_type[kind].bytes)})`,
  );
  const whole = `${size(files.bytes)} in all, up to ${size(files.max_file_bytes)} a file`;
  return el("p", { className: "hint usage-note", text: kinds.length ? `${whole}; ${kinds.join(", ")}.` : `${whole}.` });
}

function usageRow(what, held, extra = []) {
  const row = el("tr", {}, [
    cell("What", "usage-what", document.createTextNode(what)),
    cell("Held", "usage-held", el("div", { className: "usage-meter" }, [...heldNodes(what, held), ...extra])),
  ]);
  row.dataset.usage = what;
  return row;
}

// Fills the card once; `call` is the page's signed-in call.
export async function showUsage(call) {
  const loading = byId("usage-loading");
  const error = byId("usage-error");
  const table = byId("usage-table");
  try {
    const usage = await call("GET", "/usage");
    byId("usage-body").replaceChildren(
      usageRow("Files", usage.files, [filesNote(usage.files)]),
      usageRow("Folders", usage.folders),
      usageRow("Public links", usage.aliases),
      usageRow("API keys", usage.keys),
    );
    table.hidden = false;
    hide(error);
  } catch (failure) {
    show(error, failedText("Loading what your account holds", failure));
  } finally {
    loading.hidden = true;
  }
}
