// Sign-in identities on the security page, while single sign-on is on: the accounts at the
// identity provider linked to this one (provider, e-mail or subject, when linked), "Link <provider>" through the provider in a
// window of its own (the change needs a recent sign-in, as every change here), and "Unlink"
// behind a confirmation. The service refuses to unlink the account's last way in, and the page
// says its message.

import { ApiError, api, currentToken, failedText, needsReauthentication, sessionEnded } from "../api.js";
import { byId, el, hide, show } from "../dom.js";
import { reauthenticate } from "../reauth.js";
import { signedOut } from "../session.js";
import { actionText, providerName, providerText, providerWindow, signInMethods } from "../sso.js";
import { cell, rowButton } from "../table.js";
import { when } from "../time.js";

// The identity's provider (the API gives its issuer) by the label the operator gave it.
function providerOf(item, label) {
  return label ? providerName(label) : providerText(item.provider);
}

// Who the identity is at the provider: its e-mail, else its subject (the provider's id).
function accountNodes(item) {
  const subject = el("code", { className: "id", text: String(item.subject || "") });
  if (typeof item.email === "string" && item.email) {
    return [el("span", { text: item.email }), el("div", { className: "hint" }, ["Subject ", subject])];
  }
  return ["Subject ", subject];
}

function identityRow(item, label, unlink) {
  const provider = providerOf(item, label);
  const button = rowButton("Unlink", "danger", ` ${provider} identity ${item.email || item.subject || ""}`);
  button.dataset.identityId = item.id;
  button.addEventListener("click", () => unlink(item, provider));
  const row = el("tr", {}, [
    cell("Provider", "key-name identity-provider", el("span", { text: provider })),
    cell("Account", "identity-account", el("div", {}, accountNodes(item))),
    cell("Linked", "identity-linked", when(item.linked_at, "—")),
    cell("Actions", "key-actions", button),
  ]);
  row.dataset.identityId = item.id;
  return row;
}

export function identitiesSection({ call, ask, done }) {
  const section = byId("identities");
  const error = byId("identities-error");
  const empty = byId("identities-empty");
  const table = byId("identities-table");
  const tbody = byId("identities-body");
  const passwordNote = byId("identities-password");
  const link = byId("identity-link");
  let label = "";

  function unlink(item, provider) {
    const who = item.email || item.subject || "this identity";
    ask(
      {
        title: `Unlink ${provider} (${who})?`,
        description: `Signing in with this ${provider} account stops working here. Your other sessions are signed out.`,
        confirmText: "Unlink",
      },
      async () => {
        const data = await call("DELETE", `/auth/identities/${encodeURIComponent(item.id)}`);
        const ended = data && Number.isInteger(data.sessions_ended) ? ` Other sessions ended: ${data.sessions_ended}.` : "";
        return `Unlinked ${provider} (${who}).${ended}`;
      },
      "Unlinking the identity",
    );
  }

  // Through the provider in its own window; the code it comes back with, traded with this
  // session's token, links the identity. The trade spends the code even when the service asks
  // for a recent sign-in first, so then the step-up is made and the user links again (the
  // provider's window needs a click to open).
  link.addEventListener("click", async () => {
    hide(error);
    link.disabled = true;
    const provider = providerName(label);
    try {
      const code = await providerWindow("link", label);
      if (!code) {
        show(error, `The ${provider} window was closed before you signed in: nothing was linked.`);
        return;
      }
      let data;
      try {
        data = await api("POST", "/auth/oidc/exchange", { token: currentToken(null), body: { code } });
      } catch (failure) {
        if (!needsReauthentication(failure)) {
          throw failure;
        }
        const renewed = await reauthenticate(currentToken(null));
        show(error, renewed ? `Confirmed it's you. Press “${actionText("Link", label)}” again to link it.` : "You cancelled the check, so nothing was linked.");
        return;
      }
      const linked = data && data.identity ? data.identity : data || {};
      await done(`Linked ${provider} (${linked.email || linked.subject || "your account there"}): you can sign in with it now.`);
    } catch (failure) {
      if (sessionEnded(failure)) {
        signedOut(failure);
        return;
      }
      // A refusal from the service in its words; the provider's window's own failure as said.
      show(error, failure instanceof ApiError ? failedText(`Linking ${provider}`, failure) : failure.message);
    } finally {
      link.disabled = false;
    }
  });

  return {
    // The section's own state (GET /auth/identities); the page reloads it after every change.
    async refresh() {
      hide(error);
      const offered = await signInMethods();
      label = offered.oidc ? offered.oidc.label : "";
      if (!label) {
        section.hidden = true; // single sign-on is off: no identity can sign in
        return;
      }
      let data;
      try {
        data = await call("GET", "/auth/identities");
      } catch (failure) {
        section.hidden = false;
        show(error, failedText("Loading your sign-in identities", failure));
        return;
      }
      const identities = Array.isArray(data.identities) ? data.identities : [];
      tbody.replaceChildren(...identities.map((item) => identityRow(item, label, unlink)));
      table.hidden = identities.length === 0;
      empty.hidden = identities.length > 0;
      if (data.password === false) {
        show(passwordNote, "Your account has no password: it signs in only through its identities, so the last one can't be unlinked.");
      } else {
        hide(passwordNote);
      }
      link.textContent = actionText("Link", label);
      link.hidden = false;
      section.hidden = false;
    },
  };
}
