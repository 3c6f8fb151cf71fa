// The signed-in session and the one-time notice for the login page, both in sessionStorage:
// this tab only, gone when the tab closes. The token is never put in a URL or written to the
// console; it leaves this tab only in the Authorization header (see api.js).

const SESSION_KEY = "filehost.session";
const NOTICE_KEY = "filehost.notice";
// The dashboard address a page was asked at without a session (a copied link opened in a new
// tab), to go on to once signed in.
const RETURN_KEY = "filehost.return";

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

function rememberAddress() {
  sessionStorage.setItem(RETURN_KEY, window.location.pathname + window.location.search);
}

// Where to go once signed in: the address remembered (used once) when it is one of `pages` (the
// signed-in pages' paths) on this origin, else `fallback`. Never anywhere else: what is
// remembered is checked, not trusted, so a stored "//elsewhere.example/keys" leads nowhere.
export function takeReturnAddress(pages, fallback) {
  const remembered = sessionStorage.getItem(RETURN_KEY);
  sessionStorage.removeItem(RETURN_KEY);
  if (!remembered || !remembered.startsWith("/")) {
    return fallback;
  }
  let address;
  try {
    address = new URL(remembered, window.location.origin);
  } catch {
    return fallback;
  }
  if (address.origin !== window.location.origin || !pages.includes(address.pathname)) {
    return fallback;
  }
  return address.pathname + address.search;
}

// The session a signed-in page works with; without one, off to sign in, told `why`, and null.
// The address asked for is where signing in leads back to.
export function requireSession(why) {
  const session = loadSession();
  if (!session) {
    rememberAddress();
    toLogin({ kind: "info", text: why });
  }
  return session;
}

// Why a session is over, in a person's words, by the service's code (its own message names a
// token, which nobody signed in to the dashboard ever saw).
const SIGNED_OUT = {
  invalid_session:
    "You have been signed out: this session was ended (logged out in another tab, ended from another device, or by a new password). Sign in again.",
  session_expired: "You have been signed out: the session expired. Sign in again.",
  account_gone: "You have been signed out: this account no longer exists.",
};

// The server says the session is over: sign in again, told why. Not back here: an ended
// session may have been ended on purpose (the password changed, every other session ended),
// and whoever signs in next starts from the keys page.
export function signedOut(failure) {
  const text = SIGNED_OUT[failure.code] || `You have been signed out. ${failure.message}`;
  toLogin({ kind: "error", text });
}
