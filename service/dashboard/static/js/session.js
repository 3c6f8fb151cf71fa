// The signed-in session and the one-time notice for the login page, both in sessionStorage:
// this tab only, gone when the tab closes. The token is never put in a URL or written to the
// console; it leaves this tab only in the Authorization header (see api.js).

const SESSION_KEY = "filehost.session";
const NOTICE_KEY = "filehost.notice";

export function loadSession() {
  try {
    const session = JSON.parse(sessionStorage.getItem(SESSION_KEY) || "null");
    if (session && typeof session.token === "string" && session.token) {
      return session;
    }
  } catch {
    // unreadable: treat as signed out
  }
  return null;
}

export function saveSession(session) {
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
}

function clearSession() {
  sessionStorage.removeItem(SESSION_KEY);
}

// Leave for the login page, which shows `notice` once; by way of `through` when given (the
// OpenID provider's logout, which sends the browser back to the login page).
export function toLogin(notice, through) {
  clearSession();
  if (notice) {
    sessionStorage.setItem(NOTICE_KEY, JSON.stringify(notice));
  }
  window.location.replace(through || "/");
}

export function takeNotice() {
  const raw = sessionStorage.getItem(NOTICE_KEY);
  sessionStorage.removeItem(NOTICE_KEY);
  try {
    const notice = JSON.parse(raw || "null");
    return notice && typeof notice.text === "string" ? notice : null;
  } catch {
    return null;
  }
}

// The session a signed-in page works with; without one, off to sign in, told `why`, and null.
export function requireSession(why) {
  const session = loadSession();
  if (!session) {
    toLogin({ kind: "info", text: why });
  }
  return session;
}

// The server says the session is over: sign in again, told the server's reason.
export function signedOut(failure) {
  toLogin({ kind: "error", text: `You have been signed out. ${failure.message}` });
}
