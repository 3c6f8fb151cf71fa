// Uploads: every file chosen or dropped goes up on its own, with a progress bar and a line
// saying how it ended.

import { describe, sendFile, sessionEnded } from "../api.js";
import { size } from "../bytes.js";
import { byId, el, hide } from "../dom.js";
import { signedOut } from "../session.js";

function uploadRefusal(file, failure) {
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
  if (failure.code === "insufficient_permission") {
    return `Refused: ${failure.message}`;
  }
  return `Upload failed: ${describe(failure)}`;
}

// `uploaded()` runs after each file that went up, to show the list as it now is.
export function uploads(token, pageStatus, uploaded) {
  const picker = byId("file-picker");
  const dropZone = byId("drop-zone");
  const list = byId("uploads");

  async function upload(file) {
    const bar = el("progress", { attrs: { max: "100", value: "0", "aria-label": `Upload of ${file.name}` } });
    const status = el("p", { className: "upload-status", text: "Starting…", attrs: { role: "status" } });
    const item = el("li", { className: "is-active" }, [
      el("span", { className: "upload-name", text: file.name }),
      bar,
      status,
    ]);
    list.prepend(item);
    const finish = (kind, text) => {
      item.className = kind;
      status.textContent = text;
    };
    let created;
    try {
      created = await sendFile("/files", token, file, (fraction) => {
        const percent = Math.min(99, Math.floor(fraction * 100));
        bar.value = percent;
        status.textContent = `Uploading… ${percent}%`;
      });
    } catch (failure) {
      if (sessionEnded(failure)) {
        signedOut(failure);
        return;
      }
      finish("is-error", uploadRefusal(file, failure));
      return;
    }
    bar.value = 100;
    finish("is-done", `Uploaded ${file.name} (${size(created.size)}).`);
    uploaded();
  }

  function uploadAll(fileList) {
    hide(pageStatus);
    for (const file of Array.from(fileList || [])) {
      upload(file);
    }
  }

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
