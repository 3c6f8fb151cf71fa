// Downloads: a file, or a ZIP of a folder or of chosen files, goes by a ticket, and the browser
// downloads it itself, streamed to disk with its own progress.

import { API, api, currentToken } from "../api.js";
import { el } from "../dom.js";

// The service's ticket lifetime: the frame is kept as long as its answer may come.
const TICKET_LIFETIME_MS = 60000;
let frames = 0;

// Downloads `target` ({file_id}, {folder_id} or {ids}) by a ticket (POST /download-tickets with the
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
