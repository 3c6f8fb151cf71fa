// Uploads: every file chosen or dropped goes up on its own, as a line of the tray with its
// progress bar, the bytes sent, the speed and the time left, a Cancel button while it goes, and
// a line saying how it ended. "Clear finished" takes the ended ones away.

import { describe, sendFile, sessionEnded } from "../api.js";
import { duration, size, speed } from "../bytes.js";
import { byId, el, hide } from "../dom.js";
import { signedOut } from "../session.js";

// The speed is the average over the last few seconds, so it follows the connection's changes
// without jumping with every progress event.
const WINDOW_MS = 3000;

function uploadRefusal(file, failure, into) {
  if (failure.status === 0) {
    return "Upload failed: the service could not be reached, or closed the connection. Try again.";
  }
  const details = failure.details && typeof failure.details === "object" ? failure.details : {};
  if (failure.code === "payload_too_large") {
    const limit = Number.isFinite(details.max_bytes) ? ` of ${size(details.max_bytes)}` : "";
    return `Refused: ${file.name} is larger than the limit${limit} per file.`;
  }
  if (failure.code === "file_limit_reached") {
    const limit = Number.isFinite(details.max_files) ? ` of ${details.max_files} files` : "";
    return `Refused: your account holds the maximum${limit}. Delete some before uploading more.`;
  }
  if (failure.code === "folder_not_found") {
    return `Refused: the folder ${into.name} no longer exists (deleted or moved away meanwhile).`;
  }
  if (failure.code === "insufficient_permission") {
    return `Refused: ${failure.message}`;
  }
  return `Upload failed: ${describe(failure)}`;
}

// "300 KiB of 900 KiB · 100 KiB/s · about 6 s left" from the progress so far. `samples`: the
// [time, bytes] of the last few seconds' progress events.
function progressText(file, sent, samples) {
  const [firstAt, firstSent] = samples[0];
  const [lastAt, lastSent] = samples[samples.length - 1];
  const parts = [`${size(sent)} of ${size(file.size)}`];
  if (lastAt > firstAt && lastSent > firstSent) {
    const rate = ((lastSent - firstSent) * 1000) / (lastAt - firstAt);
    parts.push(speed(rate), `about ${duration((file.size - sent) / rate)} left`);
  }
  return parts.join(" · ");
}

// `changed()` runs after each upload that ended in a way that may have changed the list (went
// up, or was cancelled), to show the list as it now is. `where()` is the folder open when the
// file was chosen, {id (null: the top level), name}: the file goes there.
export function uploads(token, pageStatus, changed, where) {
  const picker = byId("file-picker");
  const dropZone = byId("drop-zone");
  const list = byId("uploads");
  const clear = byId("clear-uploads");

  function syncClear() {
    clear.hidden = !list.querySelector("li:not(.is-active)");
  }

  async function upload(file) {
    const into = where();
    const bar = el("progress", { attrs: { max: "100", value: "0", "aria-label": `Upload of ${file.name}` } });
    const status = el("p", { className: "upload-status", text: "Starting…", attrs: { role: "status" } });
    const stopper = new AbortController();
    const cancel = el("button", { text: "Cancel", className: "secondary", attrs: { type: "button" } }, [
      el("span", { text: ` upload of ${file.name}`, className: "visually-hidden" }),
    ]);
    cancel.addEventListener("click", () => stopper.abort());
    const item = el("li", { className: "is-active" }, [
      el("span", { className: "upload-name", text: file.name }),
      bar,
      cancel,
      status,
    ]);
    list.prepend(item);
    const finish = (kind, text) => {
      item.className = kind;
      status.textContent = text;
      cancel.remove();
      syncClear();
    };
    const samples = [];
    let created;
    try {
      created = await sendFile(
        "/files",
        token,
        file,
        (loaded, total) => {
          const now = performance.now();
          const sent = Math.min(file.size, Math.round((loaded / total) * file.size));
          samples.push([now, sent]);
          while (samples.length > 2 && now - samples[0][0] > WINDOW_MS) {
            samples.shift();
          }
          bar.value = Math.min(99, Math.floor((loaded / total) * 100));
          status.textContent = progressText(file, sent, samples);
        },
        stopper.signal,
        { folder_id: into.id || "root" },
      );
    } catch (failure) {
      if (sessionEnded(failure)) {
        signedOut(failure);
        return;
      }
      if (failure.code === "cancelled") {
        finish("is-cancelled", `Cancelled: ${file.name} was not uploaded.`);
        changed(); // whatever the server had of it is gone: the list says so
        return;
      }
      finish("is-error", uploadRefusal(file, failure, into));
      return;
    }
    bar.value = 100;
    finish("is-done", `Uploaded ${file.name} (${size(created.size)}) into ${into.name}.`);
    changed();
  }

  function uploadAll(fileList) {
    hide(pageStatus);
    for (const file of Array.from(fileList || [])) {
      upload(file);
    }
  }

  clear.addEventListener("click", () => {
    for (const item of list.querySelectorAll("li:not(.is-active)")) {
      item.remove();
    }
    syncClear();
    picker.focus(); // the button is gone: the focus goes to where the next upload starts
  });

  picker.addEventListener("change", () => {
    uploadAll(picker.files);
    picker.value = "";
  });

  // A file dropped anywhere but the zone must not make the browser leave the page to show it.
  for (const type of ["dragover", "drop"]) {
    window.addEventListener(type, (event) => event.preventDefault());
  }
  for (const type of ["dragenter", "dragover"]) {
    dropZone.addEventListener(type, (event) => {
      event.preventDefault();
      dropZone.classList.add("is-over");
    });
  }
  dropZone.addEventListener("dragleave", () => dropZone.classList.remove("is-over"));
  dropZone.addEventListener("drop", (event) => {
    event.preventDefault();
    dropZone.classList.remove("is-over");
    uploadAll(event.dataTransfer ? event.dataTransfer.files : []);
  });
}
