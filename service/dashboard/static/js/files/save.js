// Downloads. A file or a folder's ZIP goes by a ticket: the browser downloads it itself, streamed
// to disk with its own progress. A selection's ZIP is fetched with the token and handed to the
// browser's download as a Blob under a name, held in memory until saved.

import { API, api, currentToken } from "../api.js";
import { size } from "../bytes.js";
import { el, show } from "../dom.js";

// The service's ticket lifetime: the frame is kept as long as its answer may come.
const TICKET_LIFETIME_MS = 60000;
let frames = 0;

// Downloads `target` ({file_id} or {folder_id}) by a ticket (POST /download-tickets with the
// token) posted in a form to /api/v1/downloads: the ticket goes in the form's body, never in an
// address. The answer lands in a hidden frame of its own, so a refusal never replaces the page: a
// download leaves the frame as it was, and anything that loads in it is a refusal, said by
// `refused()`. Throws what taking the ticket threw (the file deleted meanwhile, the session over).
export async function downloadByTicket(token, target, refused) {
  const { ticket } = await api("POST", "/download-tickets", { token: currentToken(token), body: target });
  frames += 1;
  const frame = el("iframe", { attrs: { name: `download-${frames}`, title: "Download", tabindex: "-1" } });
  frame.hidden = true;
  const form = el("form", { attrs: { method: "POST", action: `${API}/downloads`, target: frame.name } }, [
    el("input", { attrs: { type: "hidden", name: "ticket", value: ticket } }),
  ]);
  form.hidden = true;
  document.body.append(frame, form);
  frame.addEventListener("load", () => {
    try {
      if (frame.contentWindow.location.href === "about:blank") {
        return; // the empty frame itself, before the answer
      }
    } catch {
      // an answer of the service's own origin that may not be framed: a refusal
    }
    refused();
  });
  form.submit();
  form.remove();
  // Gone once the ticket is (a download under way goes on without it).
  setTimeout(() => frame.remove(), TICKET_LIFETIME_MS);
}

// `blob` saved under `name` by the browser's download, through a link made for the purpose.
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = el("a", { attrs: { href: url, download: name } });
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// How far a download the page fetches has come, said in `status` from a quarter of a second on
// (a quick one says nothing on the way), as often as that at most.
export function downloadProgress(status, name) {
  let last = performance.now();
  return {
    progress(loaded, total) {
      const now = performance.now();
      if (now - last < 250) {
        return;
      }
      last = now;
      show(status, total
        ? `Downloading ${name}: ${Math.floor((loaded * 100) / total)}% (${size(loaded)} of ${size(total)})…`
        : `Downloading ${name}: ${size(loaded)}…`);
    },
  };
}
