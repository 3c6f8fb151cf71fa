// The call a signed-in page makes (`sessionCaller`): api.js's, with what a session needs
// around it: sent back to sign in when the session is gone, and a step-up (reauth.js) when a
// change needs a recent sign-in. Apart from api.js, which reauth.js itself calls.

import { ApiError, api, currentToken, endedOrThrown, needsReauthentication } from "./api.js";
import { reauthenticate } from "./reauth.js";

// What a change the user declined to confirm fails with: nothing was done.
function notConfirmed() {
  return new ApiError(
    403,
    "reauthentication_cancelled",
    "You cancelled the password check, so nothing was changed.",
  );
}

// `call(method, path, body)` for a signed-in page: any call that finds the session gone sends
// the user back to sign in, saying why, and never settles (the page is being replaced). A
// change that needs a recent sign-in opens the reauthentication dialog (reauth.js) and, once
// the password is confirmed, is sent again with the new token, which every later call uses;
// cancelled, it fails with code "reauthentication_cancelled" and nothing changed.
export function sessionCaller(token) {
  let current = token;
  async function send(method, path, body) {
    try {
      return await api(method, path, { token: currentToken(current), body });
    } catch (failure) {
      if (!needsReauthentication(failure)) {
        throw failure;
      }
      const renewed = await reauthenticate(currentToken(current));
      if (!renewed) {
        throw notConfirmed();
      }
      current = renewed;
      return api(method, path, { token: current, body });
    }
  }
  return async (method, path, body) => {
    try {
      return await send(method, path, body);
    } catch (failure) {
      return endedOrThrown(failure);
    }
  };
}
