// Disable a key (it is refused until enabled again, and keeps its secret and settings) or
// enable it. Only disabling, which refuses requests that work now, is confirmed first.

import { hide, show } from "../dom.js";

// `keys`: {call, keyPath, failed, pageStatus, list, confirmFirst, gone, closeDialogs, changed}.
export function enabling(keys) {
  async function setEnabled(key, enabled, report) {
    try {
      await keys.call("PATCH", keys.keyPath(key), { enabled });
    } catch (failure) {
      if (!(await keys.gone(failure))) {
        report(keys.failed(enabled ? "Enabling the key" : "Disabling the key", failure));
      }
      return;
    }
    keys.closeDialogs();
    await keys.changed(
      enabled
        ? `Enabled the key ${key.name}. It works again from its next request.`
        : `Disabled the key ${key.name}. It is refused from its next request until you enable it.`,
    );
  }

  // The row's Disable or Enable button was pressed.
  function toggle(key, button) {
    hide(keys.pageStatus);
    hide(keys.list.error);
    if (key.enabled === false) {
      button.disabled = true;
      setEnabled(key, true, (text) => {
        show(keys.list.error, text);
        button.disabled = false;
      });
      return;
    }
    keys.confirmFirst({
      title: `Disable ${key.name}?`,
      description:
        `Anything using the key ${key.key_prefix} is refused from its next request, until ` +
        "you enable it again. It stays listed, and keeps its secret and settings.",
      items: [],
      action: "Disable key",
      run: (report) => setEnabled(key, false, report),
    });
  }

  return { toggle };
}
