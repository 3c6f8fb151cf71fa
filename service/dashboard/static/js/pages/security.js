// The security page (/security): the account's second factors and sign-in identities. The
// authenticator app (TOTP), its recovery codes, passkeys and the identities at the identity
// provider, each in its module under ../security/; this loads their state, and holds the
// confirmation every removal goes through. Every change needs a recent
// sign-in: the shared API layer asks for the password again when the service says so.

import { ApiError, failedText } from "../api.js";
import { sessionCaller } from "../caller.js";
import { byId, confirmation, hide, show } from "../dom.js";
import { signedInFrame } from "../layout.js";
import { codesSection } from "../security/codes.js";
import { identitiesSection } from "../security/identities.js";
import { passkeysSection } from "../security/passkeys.js";
import { setupSection } from "../security/setup.js";
import { totpSection } from "../security/totp.js";
import { requireSession } from "../session.js";

// The confirmation dialog: `ask({title, description, confirmText}, run, failing)` opens it;
// `run()` makes the change and returns what to say, and the page reloads the factors.
function asker(done) {
  const dialog = byId("security-dialog");
  const title = byId("security-dialog-title");
  const description = byId("security-dialog-description");
  const confirm = byId("security-dialog-confirm");
  const asked = confirmation({ dialog, cancel: byId("security-dialog-cancel"), confirm, error: byId("security-dialog-error") });
  return (what, run, failing) => {
    title.textContent = what.title;
    description.textContent = what.description;
    confirm.textContent = what.confirmText;
    asked.open(async (report) => {
      let text;
      try {
        text = await run();
      } catch (failure) {
        // A conflict (the account's last way in, say) is no failure to try again: its words alone.
        report(failure instanceof ApiError && failure.status === 409 ? failure.message : failedText(failing, failure));
        return;
      }
      asked.close("done");
      await done(text);
    });
  };
}

function start(session) {
  const call = sessionCaller(session.token);
  signedInFrame("security", session, { call });
  const pageStatus = byId("page-status");
  const pageError = byId("page-error");
  const loading = byId("mfa-loading");
  const loadError = byId("mfa-error");
  const sections = [];

  async function refresh() {
    hide(loadError);
    try {
      const mfa = await call("GET", "/auth/mfa");
      for (const section of sections) {
        section.render(mfa);
      }
    } catch (failure) {
      show(loadError, failedText("Loading your second factors", failure));
    } finally {
      loading.hidden = true;
    }
  }

  let identities = null;

  async function done(text) {
    hide(pageError);
    show(pageStatus, text);
    await Promise.all([refresh(), identities.refresh()]);
  }

  const ask = asker(done);
  const codes = codesSection({ call, ask, email: session.email });
  sections.push(codes);
  sections.push(totpSection({ call, ask, showCodes: codes.showCodes, done }));
  sections.push(passkeysSection({ call, ask, done }));
  sections.push(setupSection());
  identities = identitiesSection({ call, ask, done });
  refresh();
  identities.refresh();
}

const session = requireSession("Sign in to manage your second factors.");
if (session) {
  start(session);
}
