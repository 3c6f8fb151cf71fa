// What the deployment set for second factors, said plainly: whoever runs a fresh install sees
// what works here as it is and what a deployment must still set (GET /auth/mfa's `setup`).

import { byId } from "../dom.js";

const NOTES = {
  public_url: {
    loopback:
      "Passkeys work here because this page is at localhost on the server's own machine. " +
      "Before other people use this service, its operator sets FILEHOST_PUBLIC_URL to the " +
      "address they reach it at; passkeys belong to one address, so make them there.",
  },
  secrets_key: {
    generated:
      "Authenticator-app secrets are sealed with a key the server generated in its data " +
      "directory. Several servers sharing one store need one key: their operator sets " +
      "FILEHOST_SECRETS_KEY on each.",
  },
};

export function setupSection() {
  const list = byId("mfa-setup-notes");
  const box = byId("mfa-setup");
  return {
    render(mfa) {
      const setup = mfa.setup || {};
      const notes = Object.entries(NOTES)
        .map(([name, texts]) => texts[setup[name]])
        .filter(Boolean);
      list.replaceChildren(
        ...notes.map((text) => {
          const item = document.createElement("li");
          item.textContent = text;
          return item;
        }),
      );
      box.hidden = notes.length === 0;
    },
  };
}
