// The preview of a file, in a dialog: a raster image, a video, a sound, a PDF or the first
// 256 KiB of a text, fetched with the token as a Blob and shown through a blob: address; any
// other type (SVG, HTML, unknown) is only offered as a download, never rendered. The arrow keys
// (and Previous, Next) go to the file before or after it in the list; Escape closes, the focus
// going back to the file's link.

import { ApiError, describe, fetchBlob } from "../api.js";
import { size } from "../bytes.js";
import { byId, el, hide, show, whenClosed } from "../dom.js";
import { MAX_PREVIEW_BYTES, TEXT_PREVIEW_BYTES, blobType, couldRunCode, previewKind } from "./kinds.js";

const content = (file) => `/files/${encodeURIComponent(file.id)}/content`;

// The first bytes of a text as text: a character cut in half at the end is left out, and any
// byte that is not UTF-8 is shown as the replacement character, never run or parsed.
async function textOf(file, token, signal) {
  if (file.size === 0) {
    return { text: "", cut: false };
  }
  const cut = file.size > TEXT_PREVIEW_BYTES;
  const headers = cut ? { Range: `bytes=0-${TEXT_PREVIEW_BYTES - 1}` } : {};
  const blob = await fetchBlob(content(file), token, { headers, signal });
  // A service that ignored the range sent it all: only the first bytes are read anyway.
  const bytes = new Uint8Array(await blob.slice(0, TEXT_PREVIEW_BYTES).arrayBuffer());
  return { text: new TextDecoder("utf-8").decode(bytes, { stream: cut }), cut };
}

// The element a kind is shown in, its source the blob: address `url`.
function mediaElement(kind, file, url) {
  if (kind === "image") {
    return el("img", { className: "preview-image", attrs: { src: url, alt: file.name } });
  }
  if (kind === "video" || kind === "audio") {
    return el(kind, { className: `preview-${kind}`, attrs: { src: url, controls: "", preload: "metadata" } });
  }
  // A PDF is drawn by the browser's own viewer, which Chromium refuses inside a sandboxed frame;
  // the Blob's type is set here (application/pdf), whatever the bytes hold, and the frame's
  // document keeps this page's policy (no script of the page's origin runs in it).
  return el("iframe", { className: "preview-pdf", attrs: { src: url, title: `The PDF ${file.name}` } });
}

// `files()`: the files in view, in order; `more()`: whether the list has more files than it
// shows, and `showMore()` shows the next page of them (a promise of whether it did);
// `download(file, button)`: the page's download; `focusFor(file)`: what to give the focus to
// when the preview closes (the file's link); `showing(file)` and `closed(file)`: the page's
// address follows the file shown; `gone(file)`: the service says the file no longer exists
// (deleted meanwhile), so it leaves the list.
export function previewer(token, { files, more, showMore, download, focusFor, showing, closed, gone }) {
  const dialog = byId("preview-dialog");
  const title = byId("preview-title");
  const meta = byId("preview-meta");
  const body = byId("preview-body");
  const note = byId("preview-note");
  const previous = byId("preview-previous");
  const next = byId("preview-next");
  const save = byId("preview-download");
  let current = null; // the file shown
  let stopper = null; // stops the fetch of the file shown
  let url = null; // its blob: address, given back when another is shown or the dialog closes

  function release() {
    if (stopper) {
      stopper.abort();
      stopper = null;
    }
    if (url) {
      URL.revokeObjectURL(url);
      url = null;
    }
    body.replaceChildren();
  }

  function neighbour(step) {
    const list = files();
    const at = current ? list.findIndex((file) => file.id === current.id) : -1;
    return at < 0 ? null : list[at + step] || null;
  }

  // Past the last file shown, Next goes on into the list's next page: "100 of 100+".
  function syncSteps() {
    const list = files();
    const at = current ? list.findIndex((file) => file.id === current.id) : -1;
    const beyond = at === list.length - 1 && more();
    previous.disabled = !neighbour(-1);
    next.disabled = !neighbour(1) && !beyond;
    const count = at >= 0 ? ` · ${at + 1} of ${list.length}${more() ? "+" : ""}` : "";
    meta.textContent = `${size(current.size)} · ${current.content_type}${count}`;
  }

  async function display(file) {
    release();
    current = file;
    title.textContent = file.name;
    hide(note);
    hide(byId("preview-error"));
    syncSteps();
    showing(file);
    const kind = previewKind(file.content_type);
    if (!kind) {
      show(note, couldRunCode(file.content_type)
        ? "Files of this type are not shown here (a picture like SVG, or a page, could run " +
          "code in the dashboard): download it to open it."
        : `There is no preview for this type of file (${file.content_type}): download it to ` +
          "open it.");
      return;
    }
    if (kind !== "text" && file.size > MAX_PREVIEW_BYTES) {
      show(note, `Too large to preview: ${size(file.size)}, and previews go up to ` +
        `${size(MAX_PREVIEW_BYTES)}. Download it to open it.`);
      return;
    }
    if (kind === "pdf" && !navigator.pdfViewerEnabled) {
      show(note, "This browser shows no PDF files itself: download it to open it.");
      return;
    }
    const mine = new AbortController();
    stopper = mine;
    body.replaceChildren(el("p", { className: "hint", text: "Loading the preview…" }));
    try {
      if (kind === "text") {
        const { text, cut } = await textOf(file, token, mine.signal);
        if (mine.signal.aborted) {
          return;
        }
        body.replaceChildren(el("pre", { className: "preview-text", text, attrs: { tabindex: "0" } }));
        if (cut) {
          show(note, `The first ${size(TEXT_PREVIEW_BYTES)} of ${size(file.size)}: download it for the rest.`);
        }
        return;
      }
      const blob = await fetchBlob(content(file), token, { signal: mine.signal });
      if (mine.signal.aborted) {
        return;
      }
      url = URL.createObjectURL(new Blob([blob], { type: blobType(file.content_type) }));
      const shown = mediaElement(kind, file, url);
      shown.addEventListener("error", () => {
        if (current === file) {
          show(note, "The browser could not show this file: download it to open it.");
        }
      });
      body.replaceChildren(shown);
    } catch (failure) {
      if (mine.signal.aborted) {
        return;
      }
      body.replaceChildren();
      if (failure instanceof ApiError && failure.code === "file_not_found") {
        show(note, `Loading the preview failed: ${file.name} no longer exists (deleted meanwhile), ` +
          "so it has left the list.");
        gone(file);
        return;
      }
      show(note, `Loading the preview failed: ${failure instanceof ApiError ? describe(failure) : "try again."}`);
    }
  }

  async function step(by) {
    let file = neighbour(by);
    if (!file && by > 0 && more()) {
      next.disabled = true;
      const from = current;
      if (!(await showMore()) || current !== from) {
        syncSteps();
        return;
      }
      file = neighbour(by);
    }
    if (file) {
      display(file);
    }
  }

  previous.addEventListener("click", () => step(-1));
  next.addEventListener("click", () => step(1));
  save.addEventListener("click", () => current && download(current, save));
  byId("preview-close").addEventListener("click", () => dialog.close());
  // On the document, not the dialog: a button disabled while it works (Download) drops the
  // focus to the page's body, and the arrows still go on.
  document.addEventListener("keydown", (event) => {
    // A video's or a sound's own controls use the arrows (to seek, to change the volume).
    if (!dialog.open || event.target instanceof HTMLMediaElement || event.altKey || event.ctrlKey || event.metaKey) {
      return;
    }
    if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
      event.preventDefault();
      step(event.key === "ArrowLeft" ? -1 : 1);
    }
  });
  whenClosed(dialog, () => {
    const file = current;
    release();
    current = null;
    if (file) {
      closed(file);
    }
    const target = file ? focusFor(file) : null;
    if (target) {
      target.focus();
    }
  });

  return {
    open(file) {
      if (!dialog.open) {
        dialog.showModal();
      }
      byId("preview-close").focus();
      display(file);
    },
    get current() {
      return current;
    },
  };
}
