// The API as the pages use it: the token in the Authorization header and nowhere else, every
// refusal read from the error envelope ({success: false, error: {code, message, details}}) into
// an ApiError, and a session the server says is over sending the user back to sign in.

import { loadSession, signedOut } from "./session.js";

export const API = "/api/v1";

// Answers that mean the session is no longer usable: back to the login page.
const SESSION_ENDED = new Set([
  "credential_missing",
  "invalid_session",
  "session_expired",
  "account_gone",
  "unsupported_auth_scheme",
]);

export class ApiError extends Error {
  constructor(status, code, message, details, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
    this.retryAfter = retryAfter; // whole seconds from Retry-After, or null
  }
}

function unreachable() {
  return new ApiError(0, "network_error", "The service could not be reached. Try again.");
}

// The session token to send: this tab's stored one, which a reauthentication replaces (on this
// page or another of the tab), else the one the page started with.
export function currentToken(token) {
  const session = loadSession();
  return session ? session.token : token;
}

// The one place the token goes anywhere: the Authorization header of a request.
export function withToken(headers, token) {
  if (token) {
    headers.Authorization = `Bearer ${token}`;
  }
  return headers;
}

// An error envelope (or what stands for one) as an ApiError.
export function refusal(status, payload, retryAfterHeader) {
  const error = payload && payload.error ? payload.error : {};
  const retryAfter = /^\d{1,6}$/.test(retryAfterHeader || "") ? Number(retryAfterHeader) : null;
  return new ApiError(
    status,
    typeof error.code === "string" ? error.code : "unexpected_response",
    typeof error.message === "string" && error.message
      ? error.message
      : `The service answered with status ${status}.`,
    error.details,
    retryAfter,
  );
}

// The answer's JSON, or null when it has none (a proxy's HTML page, a cut connection).
async function payloadOf(response) {
  try {
    return await response.json();
  } catch {
    return null;
  }
}

export async function api(method, path, { token, body } = {}) {
  const headers = withToken({ Accept: "application/json" }, token);
  const init = { method, headers, credentials: "omit", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(API + path, init);
  } catch {
    throw unreachable();
  }
  const payload = await payloadOf(response);
  if (response.ok && payload && payload.success === true) {
    return payload.data;
  }
  throw refusal(response.status, payload, response.headers.get("Retry-After"));
}

// A file's bytes for the page itself, as a Blob (a preview, a thumbnail; a download goes by a
// ticket, files/save.js). The token goes in a header, so a link cannot fetch them. `headers` are
// sent besides it (a preview's Range); aborting `signal` stops the fetch (a preview closed, a
// thumbnail scrolled away with the list replaced).
export async function fetchBlob(path, token, { headers = {}, signal } = {}) {
  let response;
  try {
    response = await fetch(API + path, {
      headers: withToken({ ...headers }, currentToken(token)),
      credentials: "omit",
      cache: "no-store",
      signal,
    });
  } catch {
    if (signal && signal.aborted) {
      throw new ApiError(0, "cancelled", "Stopped.");
    }
    throw unreachable();
  }
  if (!response.ok) {
    throw refusal(response.status, await payloadOf(response), response.headers.get("Retry-After"));
  }
  return response.blob();
}

// One file as a multipart upload that must answer 201. By XMLHttpRequest, for its upload
// progress (fetch has none): `progress(loaded, total)` is told the bytes of the request body
// sent so far as they go. Aborting `signal` stops the upload where it is (the server keeps
// nothing of a body cut short). Settles with the created file's data, or an ApiError (status
// 0 when the connection failed; code "cancelled" when `signal` stopped it). `fields` go before
// the file ({folder_id}), so that the service checks them before it reads the bytes.
export function sendFile(path, token, file, progress, signal, fields = {}) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) {
      form.append(name, value);
    }
    form.append("file", file, file.name);
    const request = new XMLHttpRequest();
    request.open("POST", API + path);
    for (const [name, value] of Object.entries(withToken({ Accept: "application/json" }, currentToken(token)))) {
      request.setRequestHeader(name, value);
    }
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable && event.total > 0) {
        progress(event.loaded, event.total);
      }
    });
    request.addEventListener("load", () => {
      let payload = null;
      try {
        payload = JSON.parse(request.responseText);
      } catch {
        payload = null;
      }
      if (request.status === 201 && payload && payload.success === true) {
        resolve(payload.data);
        return;
      }
      reject(refusal(request.status, payload, request.getResponseHeader("Retry-After")));
    });
    request.addEventListener("error", () => reject(unreachable()));
    request.addEventListener("abort", () =>
      reject(new ApiError(0, "cancelled", "The upload was cancelled.")),
    );
    if (signal) {
      signal.addEventListener("abort", () => request.abort(), { once: true });
    }
    request.send(form);
  });
}

export function sessionEnded(error) {
  return error instanceof ApiError && error.status === 401 && SESSION_ENDED.has(error.code);
}

// For a call made on the session's behalf: a failure saying the session is over signs the page
// out and answers a promise that never settles (the page is leaving); any other is thrown on.
export function endedOrThrown(failure) {
  if (sessionEnded(failure)) {
    signedOut(failure);
    return new Promise(() => {});
  }
  throw failure;
}

// A sensitive change refused until the password is confirmed again (step-up).
export function needsReauthentication(error) {
  return error instanceof ApiError && error.status === 403 && error.code === "reauthentication_required";
}

// The envelope's message, and what each field was refused for when the API says.
export function describe(error) {
  const details = error.details;
  if (!details || typeof details !== "object" || Array.isArray(details)) {
    return error.message;
  }
  const reasons = [];
  for (const [field, why] of Object.entries(details)) {
    const text = problemText(why);
    if (text) {
      reasons.push(`${field} ${text}`);
    }
  }
  // The service's message names each invalid field already: what it says is not said twice.
  const unsaid = reasons.filter((reason) => !error.message.includes(reason));
  return unsaid.length ? `${error.message} ${unsaid.join("; ")}.` : error.message;
}

// What a reason in an error's details says, whatever its shape: a sentence, an object with a
// reason, or (a field made of fields, like a key's rate limit) each part's own reason.
export function problemText(why) {
  if (typeof why === "string") {
    return why;
  }
  if (!why || typeof why !== "object" || Array.isArray(why)) {
    return "";
  }
  if (typeof why.reason === "string") {
    return why.reason;
  }
  return Object.entries(why)
    .map(([part, reason]) => {
      const text = problemText(reason);
      return text ? `${part} ${text}` : "";
    })
    .filter((text) => text)
    .join("; ");
}

// "Try again in 30 s." when the server said how long to wait; nothing more after a network
// failure, whose message says to try again already, nor after a 404: what is not there will
// not be there on a second try.
export function retryHint(failure) {
  if (failure instanceof ApiError && (failure.code === "reauthentication_cancelled" || failure.status === 404)) {
    return "";
  }
  if (failure instanceof ApiError && failure.retryAfter) {
    return ` Try again in ${failure.retryAfter} s.`;
  }
  return failure instanceof ApiError && failure.status === 0 ? "" : " Try again.";
}

// "Loading your sessions failed: <why>. Try again." for an alert.
export function failedText(what, failure) {
  const why = failure instanceof ApiError ? describe(failure) : "No answer.";
  return `${what} failed: ${why}${retryHint(failure)}`;
}
