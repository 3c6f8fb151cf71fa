// Signing in through the operator's OpenID provider (single sign-on). The service runs the
// whole flow (state, nonce, PKCE, the ID token's checks) and hands the browser back a one-time
// login code in the URL fragment, which a page trades once at POST /auth/oidc/exchange: a
// session token never travels in a URL. This module holds what the pages share: which ways in
// the service offers, the way to the provider (checked first, so a provider that is down is said
// on the page, not as the service's JSON), the fragment read and wiped, and the provider in a
// window of its own for a signed-in page (step-up, linking), whose answer comes back by
// postMessage from this origin only.

// api.js imports this module (through reauth.js) and this one imports api.js: only functions
// and classes used after both have loaded cross, never a value read while loading.
import { ApiError, refusal } from "./api.js";

const START = "/api/v1/auth/oidc/start";
// The name of the provider's window a signed-in page opens: the login page that window lands on
// knows by it to hand the code to the page that opened it instead of signing in itself.
const WINDOW_NAME = "filehost-oidc";
const MESSAGE = "filehost.oidc";
// The fragment's fields the service's callback writes: oidc_code (the one-time login code) or
// oidc_error (the refusal's error code), with purpose. Named from their prefix here, so that
// no error code of the API is mistaken for them.
const FRAGMENT_PREFIX = "oidc";

let methods = null; // the promise of GET /auth/methods, asked once per page
let configuredLabel = ""; // the provider's label, once GET /auth/methods has said it

// {password: bool, oidc: {label} | null}. Unreadable (an old service, no answer): the password
// form alone, as before single sign-on.
export function signInMethods() {
  if (!methods) {
    methods = (async () => {
      try {
        const response = await fetch("/api/v1/auth/methods", {
          headers: { Accept: "application/json" },
          credentials: "omit",
          cache: "no-store",
        });
        const payload = await response.json();
        const data = response.ok && payload && payload.success === true ? payload.data : {};
        const oidc = data.oidc && typeof data.oidc.label === "string" && data.oidc.label ? { label: data.oidc.label } : null;
        configuredLabel = oidc ? oidc.label : "";
        return { password: data.password !== false, oidc };
      } catch {
        return { password: true, oidc: null };
      }
    })();
  }
  return methods;
}

// The provider's name alone: "Authentik" from a label "Sign in with Authentik" or "Authentik".
export function providerName(label) {
  return label.replace(/^(sign in|log in|continue|confirm) with\s+/i, "");
}

// The provider a session or an event names (the API gives its issuer): by the name the
// operator gave it (FILEHOST_OIDC_LABEL, once signInMethods() has answered: the service has one
// provider), else by the issuer's host; "single sign-on" when it names none.
export function providerText(provider) {
  if (configuredLabel) {
    return providerName(configuredLabel);
  }
  if (typeof provider !== "string" || !provider) {
    return "single sign-on";
  }
  try {
    return new URL(provider).host || provider;
  } catch {
    return providerName(provider);
  }
}

// A button's words for the provider: "Sign in with Authentik", "Link Authentik".
export function actionText(verb, label) {
  return `${verb} ${providerName(label)}`;
}

function startUrl(purpose) {
  return purpose ? `${START}?purpose=${encodeURIComponent(purpose)}` : START;
}

// Ask the service for the way to the provider without following it: it answers a redirect when
// the provider is reachable, else its refusal (503 sso_unavailable, within its bounded wait),
// thrown as an ApiError. The state this asks for is left unused and expires.
async function checkStart(purpose) {
  let response;
  try {
    response = await fetch(startUrl(purpose), { redirect: "manual", credentials: "same-origin", cache: "no-store" });
  } catch {
    throw new ApiError(0, "network_error", "The service could not be reached. Try again.");
  }
  if (response.type === "opaqueredirect" || (response.status >= 300 && response.status < 400)) {
    return;
  }
  let payload = null;
  try {
    payload = await response.json();
  } catch {
    payload = null;
  }
  throw refusal(response.status, payload, response.headers.get("Retry-After"));
}

// Leave this page for the provider (the login page's button).
export async function goToProvider() {
  await checkStart("");
  window.location.assign(START);
}

// What the provider's trip left in the fragment: {code} or {error}, or null. The fragment is
// wiped from the address bar (and this page's history entry) before anything else happens, so
// the code is neither kept, shared nor sent again by a reload.
export function takeFragment() {
  const hash = window.location.hash.replace(/^#/, "");
  if (!hash) {
    return null;
  }
  const fields = new URLSearchParams(hash);
  const code = fields.get(`${FRAGMENT_PREFIX}_code`);
  const error = fields.get(`${FRAGMENT_PREFIX}_error`);
  if (!code && !error) {
    return null;
  }
  window.history.replaceState(null, "", window.location.pathname + window.location.search);
  return code ? { code, purpose: fields.get("purpose") || "" } : { error, purpose: fields.get("purpose") || "" };
}

// In the provider's window a signed-in page opened: hand what the fragment held to that page
// (this origin only) and close. False when this page is no such window.
export function handBack(result) {
  let opener = null;
  try {
    opener = window.name === WINDOW_NAME && window.opener && window.opener.location.origin === window.location.origin ? window.opener : null;
  } catch {
    opener = null; // another origin's window: it gets nothing
  }
  if (!opener) {
    return false;
  }
  opener.postMessage({ type: MESSAGE, ...result }, window.location.origin);
  window.close();
  return true;
}

// What the service's callback can put in the fragment instead of a code: the error codes of
// the flow (docs/api.md), in words. `provider` is the provider's name.
const FRAGMENT_WORDS = {
  sso_state_invalid: () => "This sign-in is unknown, expired or was used already. Start again.",
  sso_browser_mismatch: () => "This sign-in was started in another browser. Start again here.",
  sso_provider_refused: (provider) => `${provider} did not sign you in: it was cancelled or refused there.`,
  sso_code_rejected: (provider) => `${provider} refused this sign-in's code (used already or expired). Start again.`,
  sso_reauthentication_stale: (provider) => `${provider} did not ask for your sign-in again. Try again.`,
  sso_email_unverified: (provider) =>
    `${provider} has not verified your e-mail address, so it can't be matched to an account here.`,
  sso_domain_not_allowed: () => "Accounts of your e-mail's domain may not sign in here.",
  sso_account_not_found: (provider) =>
    `No account here matches your ${provider} account. Ask the operator for one, or sign in with your password and link it on the Security page.`,
  sso_identity_mismatch: (provider) => `The ${provider} account you signed in with is not linked to this account.`,
  identity_taken: (provider) => `That ${provider} account is linked to another account here.`,
  sso_unavailable: (provider) => `${provider} can't be reached right now, so signing in with it is not possible. Try again later.`,
};

// A refusal from the flow, in words: words for the code the fragment carried, else the
// service's own message; an ID token that failed a check (sso_token_…) is said as one.
export function ssoErrorText(error, label) {
  const provider = label ? providerName(label) : "the identity provider";
  const code = error instanceof ApiError ? error.code : String(error || "");
  if (Object.hasOwn(FRAGMENT_WORDS, code)) {
    const text = FRAGMENT_WORDS[code](provider);
    return text.charAt(0).toUpperCase() + text.slice(1);
  }
  if (error instanceof ApiError) {
    return error.message;
  }
  if (/^sso_token_/.test(code)) {
    return `${provider.charAt(0).toUpperCase()}${provider.slice(1)}'s answer failed this service's checks, so you were not signed in. Start again; if it keeps failing, tell the operator.`;
  }
  return `Signing in with ${provider} failed (${code.slice(0, 60) || "no reason given"}). Start again.`;
}

// A signed-in page's trip to the provider for `purpose` ("reauthenticate", "link") in a window
// of its own, so the page and what it was doing stay: the one-time code that window came back
// with, or null when the user closed it. A provider that is down throws, as checkStart says.
// The window is opened at once, within the click, so a popup blocker lets it through, and sent
// on once the service answered.
export function providerWindow(purpose, label) {
  const opened = window.open("", WINDOW_NAME, "popup,width=520,height=680");
  return (async () => {
    try {
      await checkStart(purpose);
    } catch (failure) {
      if (opened) {
        opened.close();
      }
      throw failure;
    }
    if (!opened) {
      throw new ApiError(0, "network_error", "The browser blocked the sign-in window: allow pop-ups for this page and try again.");
    }
    opened.location.href = new URL(startUrl(purpose), window.location.origin).href;
    return new Promise((resolve, reject) => {
      // The window closes itself right after posting its answer, and a timer may see it closed
      // before the message is delivered (they are separate task sources): closed counts as
      // "closed by the user" only once its answer had a moment more to arrive.
      const watch = window.setInterval(() => {
        if (opened.closed) {
          window.clearInterval(watch);
          window.setTimeout(() => {
            if (done()) {
              resolve(null);
            }
          }, 1000);
        }
      }, 500);
      let open = true;
      // Stop listening; false when the answer was had already.
      function done() {
        const was = open;
        open = false;
        window.clearInterval(watch);
        window.removeEventListener("message", received);
        return was;
      }
      function received(event) {
        if (event.origin !== window.location.origin || event.source !== opened || !event.data || event.data.type !== MESSAGE) {
          return;
        }
        if (!done()) {
          return;
        }
        if (typeof event.data.code === "string" && event.data.code) {
          resolve(event.data.code);
        } else {
          reject(new Error(ssoErrorText(event.data.error, label)));
        }
      }
      window.addEventListener("message", received);
    });
  })();
}
