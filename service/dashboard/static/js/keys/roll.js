// Roll a key: it gets a new secret, shown once, and its current secret keeps working for the
// grace chosen. Cutting off a secret that works now is confirmed first.

import { byId, hide, show, whenClosed } from "../dom.js";
import { whenText } from "../time.js";

// What rolling with `grace` seconds refuses that works now, in words for the confirmation.
function cutsOf(key, grace) {
  const cuts = [];
  if (grace === 0) {
    cuts.push(`The current secret, ${key.key_prefix}, is refused from its next request.`);
  }
  if (key.previous_secret_expires_at) {
    cuts.push(
      "The secret it replaced when it was last rolled, still working until " +
        `${whenText(key.previous_secret_expires_at)}, is refused from now on.`,
    );
  }
  return cuts;
}

// `keys`: {call, keyPath, failed, pageStatus, secret, list, confirmFirst, gone, closeDialogs}.
export function rollDialog(keys) {
  const dialog = byId("roll-dialog");
  const name = byId("roll-name");
  const prefix = byId("roll-prefix");
  const form = byId("roll-form");
  const error = byId("roll-error");
  const submit = byId("roll-submit");
  let rolling = null; // the key the dialog is about

  function open(key) {
    rolling = key;
    form.reset(); // the default grace again
    name.textContent = key.name;
    prefix.textContent = key.key_prefix;
    hide(error);
    hide(keys.pageStatus);
    submit.disabled = false;
    dialog.showModal();
    form.querySelector('input[name="roll-grace"]:checked').focus();
  }

  byId("roll-cancel").addEventListener("click", () => dialog.close("cancel"));

  whenClosed(dialog, () => {
    rolling = null;
  });

  async function roll(key, graceSeconds, report) {
    let rolled;
    try {
      rolled = await keys.call("POST", `${keys.keyPath(key)}/roll`, { grace_seconds: graceSeconds });
    } catch (failure) {
      if (!(await keys.gone(failure))) {
        report(keys.failed("Rolling the key", failure));
      }
      return;
    }
    keys.closeDialogs();
    keys.secret.hide();
    keys.secret.show(rolled, true);
    await keys.list.refresh();
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const key = rolling;
    if (!key) {
      return;
    }
    const grace = Number(form.querySelector('input[name="roll-grace"]:checked').value);
    const cuts = cutsOf(key, grace);
    if (cuts.length === 0) {
      submit.disabled = true;
      hide(error);
      roll(key, grace, (text) => {
        show(error, text);
        submit.disabled = false;
      });
      return;
    }
    dialog.close("confirm");
    keys.confirmFirst({
      title: `Roll ${key.name} and cut off its old secret?`,
      description: "Anything still using the old secret stops working:",
      items: cuts,
      action: "Roll and cut off",
      run: (report) => roll(key, grace, report),
    });
  });

  return { open, dialog };
}
