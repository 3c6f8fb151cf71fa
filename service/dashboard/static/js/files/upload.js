// Uploads: every file chosen or dropped goes up on its own, as a line of the tray with its
// progress bar, the bytes sent, the speed and the time left, a Cancel button while it goes, and
// a line saying how it ended. "Clear finished" takes the ended ones away. A large file goes up
// resumably (tus.js): a dropped connection is retried by itself, then the line pauses with a
// Resume button; an upload a reloaded page did not finish is listed, to be continued by
// choosing the same file again, or discarded. A folder goes up whole, its folders made as they
// are needed (folder_upload.js).

import { describe, sendFile, sessionEnded } from "../api.js";
import { duration, size, speed } from "../bytes.js";
import { byId, el, hide, show } from "../dom.js";
import { sessionCaller } from "../caller.js";
import { signedOut } from "../session.js";
import { chosenFiles, droppedFiles, folderMaker, withoutSystemFiles } from "./folder_upload.js";
import { RESUMABLE_FROM, discard, forget, offsetOf, resumable, sendResumably, unfinished } from "./tus.js";

// The speed is the average over the last few seconds, so it follows the connection's changes
// without jumping with every progress event.
const WINDOW_MS = 3000;
// Uploads sent at once; the others wait their turn, in the order chosen. A folder of a thousand
// files then never holds a thousand requests open, nor spends the session's burst of requests.
const AT_ONCE = 4;

function percent(part, whole) {
  return whole > 0 ? Math.floor((part / whole) * 100) : 0;
}

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
  if (failure.code === "upload_limit_reached") {
    return "Refused: your account has the maximum of uploads in progress. Let one finish, or discard an unfinished one below.";
  }
  if (failure.code === "upload_not_found") {
    return `Upload failed: ${failure.message}`;
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
// up, or was cancelled), to show the list as it now is. `where()` answers the folder the files
// chosen now go into, {id (null: the top level), name}: the one being opened, once it is (a file
// continuing an unfinished upload goes where that upload was going). `account`: whose
// unfinished uploads this browser keeps.
export function uploads(token, account, pageStatus, changed, where) {
  const picker = byId("file-picker");
  const folderPicker = byId("folder-picker");
  const dropZone = byId("drop-zone");
  const list = byId("uploads");
  const clear = byId("clear-uploads");
  const waiting = byId("unfinished-uploads");
  const waitingList = byId("unfinished-list");

  function syncClear() {
    clear.hidden = !list.querySelector("li:not(.is-active)");
  }

  function syncWaiting() {
    waiting.hidden = !waitingList.querySelector("li");
  }

  // Leaving the page stops what is still going up (a small file is lost, a large one waits to
  // be continued): the browser asks first.
  window.addEventListener("beforeunload", (event) => {
    if (list.querySelector("li.is-active")) {
      event.preventDefault();
      event.returnValue = "";
    }
  });

  function upload(file, here, before = null) {
    const known = file.size > RESUMABLE_FROM ? resumable(account, file, here.id) : null;
    const into = known ? { id: known.folderId, name: known.folderName } : here;
    if (known) {
      const line = waitingList.querySelector(`li[data-key="${CSS.escape(known.key)}"]`);
      if (line) {
        line.remove();
        syncWaiting();
      }
    }
    const bar = el("progress", { attrs: { max: "100", value: "0", "aria-label": `Upload of ${file.name}` } });
    const status = el("p", { className: "upload-status", text: "Waiting to start…", attrs: { role: "status" } });
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
    if (before) {
      before.replaceWith(item);
    } else {
      list.prepend(item);
    }
    const finish = (kind, text) => {
      item.className = kind;
      status.textContent = text;
      cancel.remove();
      syncClear();
    };
    const samples = [];
    let resumedFrom = null;
    const progress = (sent, continued) => {
      if (continued && resumedFrom === null) {
        resumedFrom = sent;
      }
      const now = performance.now();
      samples.push([now, sent]);
      while (samples.length > 2 && now - samples[0][0] > WINDOW_MS) {
        samples.shift();
      }
      bar.value = Math.min(99, percent(sent, file.size));
      const text = progressText(file, sent, samples);
      status.textContent = resumedFrom === null ? text : `Continued from ${percent(resumedFrom, file.size)}% · ${text}`;
    };
    // While a dropped connection waits to be tried again, the speed before it says nothing: the
    // line says what happens instead, and the speed starts again from the next bytes sent.
    const retrying = (ms) => {
      samples.length = 0;
      status.textContent = `The connection dropped: trying again in ${Math.ceil(ms / 1000)} s…`;
    };
    const send = () =>
      file.size > RESUMABLE_FROM
        ? sendResumably(account, token, file, into, progress, stopper.signal, retrying)
        : sendFile(
            "/files",
            token,
            file,
            (loaded, total) => progress(Math.min(file.size, Math.round((loaded / total) * file.size)), false),
            stopper.signal,
            { folder_id: into.id || "root" },
          );
    const cancelled = () => finish("is-cancelled", `Cancelled: ${file.name} was not uploaded.`);
    const ended = (created) => {
      bar.value = 100;
      finish("is-done", `Uploaded ${file.name} (${size(created.size)}) into ${into.name}.`);
      changed();
    };
    const failed = (failure) => {
      if (sessionEnded(failure)) {
        signedOut(failure);
        return;
      }
      if (failure.code === "cancelled") {
        cancelled();
        changed(); // whatever the server had of it is gone: the list says so
        return;
      }
      if (failure.code === "paused") {
        const at = failure.details ? percent(failure.details.offset, file.size) : 0;
        finish("is-paused", `Paused at ${at}%: the connection to the service dropped. Resume when it is back.`);
        const resume = el("button", { text: "Resume", className: "secondary", attrs: { type: "button" } }, [
          el("span", { text: ` upload of ${file.name}`, className: "visually-hidden" }),
        ]);
        resume.addEventListener("click", () => upload(file, into, item));
        item.insertBefore(resume, status);
        return;
      }
      finish("is-error", uploadRefusal(file, failure, into));
    };
    inTurn(
      () => {
        status.textContent = "Starting…";
        return send().then(ended, failed);
      },
      stopper.signal,
      cancelled,
    );
  }

  // Uploads waiting their turn, each {begin}, and how many are being sent.
  const waitingTurn = [];
  let sendingNow = 0;

  // Start `begin` (which answers when its upload has ended) once fewer than AT_ONCE are being
  // sent; cancelled (`signal`) before its turn, it never starts and `cancelled` says so.
  function inTurn(begin, signal, cancelled) {
    const turn = { begin };
    waitingTurn.push(turn);
    signal.addEventListener(
      "abort",
      () => {
        const at = waitingTurn.indexOf(turn);
        if (at >= 0) {
          waitingTurn.splice(at, 1);
          cancelled();
        }
      },
      { once: true },
    );
    nextTurns();
  }

  function nextTurns() {
    while (sendingNow < AT_ONCE && waitingTurn.length) {
      const { begin } = waitingTurn.shift();
      sendingNow += 1;
      begin().finally(() => {
        sendingNow -= 1;
        nextTurns();
      });
    }
  }

  // A file that could not be sent at all: its line, saying why.
  function refused(file, text) {
    list.prepend(
      el("li", { className: "is-error" }, [
        el("span", { className: "upload-name", text: file.name }),
        el("p", { className: "upload-status", text, attrs: { role: "status" } }),
      ]),
    );
    syncClear();
  }

  // `chosen`: {file, folders} (folder_upload.js), each file going into its folders below the
  // open one, made as they are first needed.
  async function uploadAll(everything) {
    hide(pageStatus);
    const { kept: chosen, left } = withoutSystemFiles(everything);
    if (left.length) {
      const count = everything.length - chosen.length;
      show(
        pageStatus,
        `Left out ${count === 1 ? "1 file" : `${count} files`} the operating system keeps in folders for itself: ${left.join(", ")}.`,
      );
    }
    if (!chosen.length) {
      return;
    }
    const here = await where();
    const folderFor = folderMaker(sessionCaller(token), here);
    for (const { file, folders } of chosen) {
      let into;
      try {
        into = await folderFor(folders);
      } catch (failure) {
        if (sessionEnded(failure)) {
          signedOut(failure);
          return;
        }
        refused(file, `Not uploaded: the folder ${folders.join(" / ")} could not be made (${describe(failure)}).`);
        continue;
      }
      upload(file, into);
    }
  }

  // What a page before this one left unfinished: each line says how far it got, and offers to
  // discard it; choosing the same file again continues it.
  async function listUnfinished() {
    for (const entry of unfinished(account)) {
      let offset;
      try {
        offset = await offsetOf(entry.url, token);
      } catch {
        continue; // the service is unreachable now: listed next time
      }
      if (offset === null) {
        forget(account, entry.key); // expired, or ended elsewhere
        continue;
      }
      const drop = el("button", { text: "Discard", className: "secondary", attrs: { type: "button" } }, [
        el("span", { text: ` the unfinished upload of ${entry.name}`, className: "visually-hidden" }),
      ]);
      const line = el("li", { attrs: { "data-key": entry.key } }, [
        el("span", { className: "upload-name", text: entry.name }),
        el("span", {
          className: "hint",
          text: ` ${percent(offset, entry.size)}% of ${size(entry.size)} uploaded into ${entry.folderName}. Choose the file again to continue.`,
        }),
        drop,
      ]);
      drop.addEventListener("click", async () => {
        line.remove();
        syncWaiting();
        await discard(account, entry.key, entry.url, token);
      });
      waitingList.append(line);
    }
    syncWaiting();
  }
  clear.addEventListener("click", () => {
    for (const item of list.querySelectorAll("li:not(.is-active)")) {
      item.remove();
    }
    syncClear();
    picker.focus(); // the button is gone: the focus goes to where the next upload starts
  });

  for (const chooser of [picker, folderPicker]) {
    chooser.addEventListener("change", () => {
      uploadAll(chosenFiles(chooser.files));
      chooser.value = "";
    });
  }

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
    if (event.dataTransfer) {
      droppedFiles(event.dataTransfer).then(uploadAll, () => {
        show(pageStatus, "The dropped folder could not be read: choose it with the folder button instead.");
      });
    }
  });

  listUnfinished();
}
