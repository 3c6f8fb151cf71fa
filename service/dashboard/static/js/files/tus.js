// Large files go up resumably: tus 1.0 at /api/v1/uploads, the protocol any tus client speaks.
// An upload is made once, then sent in chunks, each PATCH from the offset the service holds: a
// dropped connection costs only the bytes that were on their way (the service keeps what
// arrived), and is retried by itself a few times. Each upload's URL is kept in the tab's
// sessionStorage under the file's fingerprint (name, size, last change, folder), per account, so
// a reloaded page offers to go on: the file chosen again continues from where the service is.
// Never localStorage: nothing of the account outlives the tab (an upload left when the tab
// closes expires on the service). A small client of our own: the dashboard loads plain modules, no bundler.

import { API, ApiError, currentToken, refusal, withToken } from "../api.js";

// Files larger than this go up resumably; smaller ones in one request (POST /files).
export const RESUMABLE_FROM = 8 * 1024 * 1024;
// Each PATCH: a multiple of the object store's 8 MiB parts, so no bytes wait between chunks.
export const CHUNK_BYTES = 64 * 1024 * 1024;
// Waits before each retry of a chunk whose connection dropped; then the upload pauses.
const RETRY_DELAYS_MS = [1000, 3000, 5000, 10000];
// Refusals that a retry may get past.
const TRANSIENT = new Set([
  "upload_in_progress",
  "upload_offset_mismatch",
  "store_unavailable",
  "storage_unavailable",
  "rate_limited",
]);

const STORE_PREFIX = "filehost.uploads:";

function storeKey(account) {
  return STORE_PREFIX + account;
}

function stored(account) {
  try {
    const entries = JSON.parse(sessionStorage.getItem(storeKey(account)) || "{}");
    return entries && typeof entries === "object" ? entries : {};
  } catch {
    return {};
  }
}

function save(account, entries) {
  try {
    sessionStorage.setItem(storeKey(account), JSON.stringify(entries));
  } catch {
    // storage full or off: the upload still goes, it just cannot be resumed after a reload
  }
}

function remember(account, key, entry) {
  save(account, { ...stored(account), [key]: entry });
}

export function forget(account, key) {
  const entries = stored(account);
  delete entries[key];
  save(account, entries);
}

export function fingerprint(file, folderId) {
  return [folderId || "root", file.size, file.lastModified, file.name].join(":");
}

function sameFile(entry, file) {
  return entry.name === file.name && entry.size === file.size && entry.lastModified === file.lastModified;
}

// The uploads this browser began for `account` and did not finish: {key, url, name, size,
// lastModified, folderId, folderName}, as stored (their offsets are the service's: ask with
// `offsetOf`).
export function unfinished(account) {
  return Object.entries(stored(account)).map(([key, entry]) => ({ key, ...entry }));
}

// The unfinished upload of `file` to go on with: the one into `folderId`, else one of the same
// file into another folder (chosen again after a reload, wherever the page is); or null.
export function resumable(account, file, folderId) {
  const entries = unfinished(account);
  const exact = entries.find((entry) => entry.key === fingerprint(file, folderId));
  return exact || entries.find((entry) => sameFile(entry, file)) || null;
}

function encode(value) {
  return btoa(String.fromCharCode(...new TextEncoder().encode(value)));
}

// One tus request: {status, header(name), payload}; a refusal's envelope as an ApiError.
function send(method, url, token, headers, body, progress, signal) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open(method, url);
    const all = withToken({ "Tus-Resumable": "1.0.0", Accept: "application/json", ...headers }, currentToken(token));
    for (const [name, value] of Object.entries(all)) {
      request.setRequestHeader(name, value);
    }
    if (progress) {
      request.upload.addEventListener("progress", (event) => progress(event.loaded));
    }
    request.addEventListener("load", () => {
      let payload = null;
      try {
        payload = request.responseText ? JSON.parse(request.responseText) : null;
      } catch {
        payload = null;
      }
      if (request.status >= 200 && request.status < 300) {
        resolve({ status: request.status, header: (name) => request.getResponseHeader(name), payload });
        return;
      }
      reject(refusal(request.status, payload, request.getResponseHeader("Retry-After")));
    });
    request.addEventListener("error", () =>
      reject(new ApiError(0, "network_error", "The connection to the service dropped.")),
    );
    request.addEventListener("abort", () => reject(new ApiError(0, "cancelled", "The upload was cancelled.")));
    if (signal) {
      if (signal.aborted) {
        reject(new ApiError(0, "cancelled", "The upload was cancelled."));
        return;
      }
      signal.addEventListener("abort", () => request.abort(), { once: true });
    }
    request.send(body === undefined ? null : body);
  });
}

// How far the service has the upload at `url`: its offset, or null when it is gone (expired,
// ended, or another account's).
export async function offsetOf(url, token) {
  try {
    const answer = await send("HEAD", url, token, {});
    return Number(answer.header("Upload-Offset"));
  } catch (failure) {
    if (failure.status === 404) {
      return null;
    }
    throw failure;
  }
}

export async function discard(account, key, url, token) {
  forget(account, key);
  try {
    await send("DELETE", url, token, {});
  } catch {
    // gone already, or unreachable: it expires by itself
  }
}

function wait(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    if (signal) {
      signal.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(new ApiError(0, "cancelled", "The upload was cancelled."));
        },
        { once: true },
      );
    }
  });
}

// Upload `file` into the folder `into` ({id, name}) resumably: the file the upload became.
// `progress(sent, started)` with the bytes of the whole file the service has or is being sent,
// and whether this go continued an upload; `signal` cancels (the upload is then ended);
// `retrying(ms)` is told before each wait of `ms` for a retry. Fails with code "paused" when the
// connection stayed down through every retry: the upload is kept, to be continued by calling
// this again with the same file.
export async function sendResumably(account, token, file, into, progress, signal, retrying) {
  let key = fingerprint(file, into.id);
  let url = null;
  let offset = 0;
  const known = resumable(account, file, into.id);
  if (known) {
    const found = await offsetOf(known.url, token);
    if (found === null) {
      forget(account, known.key);
    } else {
      [key, url, offset] = [known.key, known.url, found];
    }
  }
  const continued = url !== null;
  if (url === null) {
    const metadata = [
      `filename ${encode(file.name)}`,
      `filetype ${encode(file.type || "application/octet-stream")}`,
      `folder_id ${encode(into.id || "root")}`,
    ].join(",");
    const made = await send(
      "POST",
      `${API}/uploads`,
      token,
      { "Upload-Length": String(file.size), "Upload-Metadata": metadata },
      undefined,
      null,
      signal,
    );
    // Its path: this page's origin, whatever origin FILEHOST_PUBLIC_URL names.
    url = new URL(made.header("Location"), window.location.href).pathname;
    remember(account, key, {
      url,
      name: file.name,
      size: file.size,
      lastModified: file.lastModified,
      folderId: into.id,
      folderName: into.name,
    });
  }
  progress(offset, continued);
  try {
    let failures = 0;
    let fileId = null;
    while (fileId === null) {
      const end = Math.min(file.size, offset + CHUNK_BYTES);
      try {
        const answer = await send(
          "PATCH",
          url,
          token,
          { "Content-Type": "application/offset+octet-stream", "Upload-Offset": String(offset) },
          file.slice(offset, end),
          (loaded) => progress(offset + loaded, continued),
          signal,
        );
        offset = Number(answer.header("Upload-Offset"));
        fileId = answer.header("Filehost-File-Id");
        failures = 0;
        progress(offset, continued);
      } catch (failure) {
        const transient = failure.status === 0 || TRANSIENT.has(failure.code);
        if (failure.code === "cancelled" || !transient) {
          throw failure;
        }
        if (failures >= RETRY_DELAYS_MS.length) {
          throw new ApiError(0, "paused", "The connection to the service stayed down.", { offset });
        }
        const delay = failure.retryAfter ? failure.retryAfter * 1000 : RETRY_DELAYS_MS[failures];
        if (retrying) {
          retrying(delay);
        }
        await wait(delay, signal);
        failures += 1;
        const found = await offsetOf(url, token).catch(() => offset);
        if (found === null) {
          forget(account, key);
          throw new ApiError(404, "upload_not_found", "The upload expired or was ended: start it again.");
        }
        offset = found;
      }
    }
    forget(account, key);
    const view = await send("GET", url, token, {});
    return view.payload.data.file;
  } catch (failure) {
    if (failure.code === "cancelled") {
      await discard(account, key, url, token);
    } else if (failure.code !== "paused" && failure.status !== 0) {
      forget(account, key); // refused for good: nothing to resume
    }
    throw failure;
  }
}
