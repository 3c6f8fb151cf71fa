// What the bar does with the chosen files: move them (the folder chosen as for one file),
// delete them (one confirmation naming how many) or download them as one ZIP; and a folder's
// "Download as ZIP". Moves and deletes are `POST /files/bulk`, a request per 1000 files, and
// every file the service refused is named with its reason.

import { ApiError, describe, sessionEnded } from "../api.js";
import { byId, confirmation, hide, show } from "../dom.js";
import { signedOut } from "../session.js";
import { downloadByTicket } from "./save.js";

// The service's MAX_BULK_IDS: at most this many ids in one bulk request.
export const MAX_BULK_IDS = 1000;
// How many refused files are named before "and N more".
const NAMED = 5;

export function plural(count, one, many) {
  return `${count} ${count === 1 ? one : many}`;
}

// One `POST /files/bulk` per MAX_BULK_IDS files; the answers' results in the files' order.
async function bulk(call, action, files, folderId) {
  const results = [];
  for (let at = 0; at < files.length; at += MAX_BULK_IDS) {
    const body = { action, ids: files.slice(at, at + MAX_BULK_IDS).map((file) => file.id) };
    if (action === "move") {
      body.folder_id = folderId || null;
    }
    const data = await call("POST", "/files/bulk", body);
    results.push(...(Array.isArray(data.results) ? data.results : []));
  }
  return results;
}

// "Moved 3 files." and, for what the service refused, "2 files were not moved: a.txt (why); …".
function outcome(files, results, done, notDone) {
  const names = new Map(files.map((file) => [file.id, file.name]));
  const refused = results.filter((result) => result && result.ok !== true);
  const worked = results.length - refused.length;
  const said = `${done} ${plural(worked, "file", "files")}.`;
  if (!refused.length) {
    return { said, failed: "" };
  }
  const named = refused.slice(0, NAMED).map((result) => {
    const why = result.error && typeof result.error.message === "string" ? result.error.message : "refused";
    return `${names.get(result.id) || result.id} (${why})`;
  });
  const more = refused.length > NAMED ? `; and ${refused.length - NAMED} more` : "";
  return {
    said,
    failed: `${plural(refused.length, "file was", "files were")} not ${notDone}: ${named.join("; ")}${more}.`,
  };
}

// A ZIP the service makes, of the chosen files (`what`: {ids}) or of a folder ({folder_id}), saved
// under `name` by the browser itself, streamed to disk, by a download ticket (save.js).
export async function saveArchive(token, what, name, button, pageStatus, pageError) {
  const focused = document.activeElement === button;
  button.disabled = true;
  hide(pageError);
  try {
    await downloadByTicket(token, what, () => {
      hide(pageStatus);
      show(pageError, `Downloading ${name} failed: the service refused it. Try again.`);
    });
    show(pageStatus, `Downloading ${name}: your browser shows how far it has come.`);
  } catch (failure) {
    if (sessionEnded(failure)) {
      signedOut(failure);
      return;
    }
    hide(pageStatus);
    show(pageError, `Downloading ${name} failed: ${failure instanceof ApiError ? describe(failure) : "try again."}`);
  } finally {
    button.disabled = false;
    // Disabled while it worked, the button lost the focus to the page's body: it gets it back.
    if (focused && document.activeElement === document.body) {
      button.focus();
    }
  }
}

// The bar's buttons. `chosen()`: the chosen files; `moveWith(what, current, save)`: the move
// dialog; `afterwards({said, failed})`: the list as it now is, with what happened said.
export function bulkBar(call, token, { chosen, moveWith, here, afterwards, pageStatus, pageError }) {
  const bar = byId("bulk-bar");
  const count = byId("bulk-count");
  const zip = byId("bulk-zip");
  const dialog = byId("bulk-delete-dialog");
  const asked = confirmation({
    dialog,
    cancel: byId("bulk-delete-cancel"),
    confirm: byId("bulk-delete-confirm"),
    error: byId("bulk-delete-error"),
  });

  byId("bulk-move").addEventListener("click", () => {
    const files = chosen();
    const what = plural(files.length, "file", "files");
    moveWith(what, here(), async (target) => {
      const { said, failed } = outcome(files, await bulk(call, "move", files, target), "Moved", "moved");
      return { said, failed };
    });
  });

  byId("bulk-delete").addEventListener("click", () => {
    const files = chosen();
    byId("bulk-delete-count").textContent = plural(files.length, "file", "files");
    asked.open(async (report) => {
      let results;
      try {
        results = await bulk(call, "delete", files);
      } catch (failure) {
        report(failure instanceof ApiError ? describe(failure) : "Deleting failed.");
        return;
      }
      asked.close("deleted");
      const { said, failed } = outcome(files, results, "Deleted", "deleted");
      await afterwards({ said, failed });
    });
  });

  zip.addEventListener("click", () => {
    const files = chosen();
    if (files.length > MAX_BULK_IDS) {
      hide(pageStatus);
      show(pageError, `A ZIP holds at most ${MAX_BULK_IDS} chosen files: choose fewer, or download ` +
        "their folder as a ZIP.");
      return;
    }
    const ids = files.map((file) => file.id);
    saveArchive(token, { ids }, "files.zip", zip, pageStatus, pageError);
  });

  return (total) => {
    bar.hidden = total === 0;
    count.textContent = `${plural(total, "file", "files")} selected`;
  };
}
