// The panel that edits a key: its name, permissions, expiry, allowed addresses and rate
// limit. Only what differs from the key as listed is sent; a change that refuses requests that
// work now is confirmed first. The server's reason for each refused field is shown by it.

import { ApiError, problemText } from "../api.js";
import { byId, hide, show } from "../dom.js";
import { permissionGrid } from "../permissions.js";
import { whenText } from "../time.js";
import { editChanges } from "./changes.js";

function formFields() {
  const fields = {
    panel: byId("edit-panel"),
    title: byId("edit-title"),
    titleName: byId("edit-title-name"),
    form: byId("edit-form"),
    error: byId("edit-error"),
    status: byId("edit-status"),
    name: byId("edit-name"),
    expiry: byId("edit-expiry"),
    expiryCurrent: byId("edit-expiry-current"),
    ips: byId("edit-ips"),
    rateDefault: byId("edit-rate-default"),
    rateOwn: byId("edit-rate-own"),
    perSecond: byId("edit-rate-per-second"),
    burst: byId("edit-rate-burst"),
    submit: byId("edit-submit"),
  };
  // The same checkboxes as the create form's, with ids of their own.
  const grid = permissionGrid("edit-perm-", "edit-permissions");
  byId("edit-permissions").insertBefore(grid, byId("edit-permissions-problem"));
  fields.boxes = Array.from(grid.querySelectorAll('input[type="checkbox"]'));
  // Where the server's reason for each field of an edit is shown, and what gets the focus.
  fields.problems = {
    name: { box: byId("edit-name-problem"), controls: [fields.name] },
    permissions: { box: byId("edit-permissions-problem"), controls: fields.boxes },
    expires_days: { box: byId("edit-expiry-problem"), controls: [fields.expiry] },
    allowed_ips: { box: byId("edit-ips-problem"), controls: [fields.ips] },
    rate_limit: { box: byId("edit-rate-problem"), controls: [fields.perSecond, fields.burst] },
  };
  return fields;
}

function clearProblems(fields) {
  hide(fields.error);
  hide(fields.status);
  for (const { box, controls } of Object.values(fields.problems)) {
    hide(box);
    for (const control of controls) {
      control.removeAttribute("aria-invalid");
    }
  }
}

// Each field's reason from a 400, next to the field; the first such field gets the focus.
// What has no field here goes with the form's error.
function showProblems(fields, failure) {
  const details =
    failure.details && typeof failure.details === "object" && !Array.isArray(failure.details)
      ? failure.details
      : {};
  const elsewhere = [];
  let first = null;
  for (const [field, why] of Object.entries(details)) {
    const place = fields.problems[field];
    const text = problemText(why);
    if (!place || !text) {
      elsewhere.push(text ? `${field} ${text}` : field);
      continue;
    }
    show(place.box, `${text.charAt(0).toUpperCase()}${text.slice(1)}.`);
    for (const control of place.controls) {
      control.setAttribute("aria-invalid", "true");
    }
    first = first || place.controls.find((control) => !control.disabled) || null;
  }
  const extra = elsewhere.length ? ` ${elsewhere.join("; ")}.` : "";
  show(fields.error, `Saving the changes failed: ${failure.message}${extra}`);
  (first || fields.error).scrollIntoView({ block: "nearest" });
  if (first) {
    first.focus();
  }
}

function syncRate(fields) {
  fields.perSecond.disabled = !fields.rateOwn.checked;
  fields.burst.disabled = !fields.rateOwn.checked;
}

// The form filled in as the key is, but the expiry, which is left empty to keep it.
function fill(fields, key) {
  fields.titleName.textContent = key.name;
  fields.name.value = key.name;
  const held = new Set(key.permissions || []);
  for (const box of fields.boxes) {
    box.checked = held.has(box.value);
  }
  fields.expiry.value = "";
  fields.expiryCurrent.textContent = key.expires_at
    ? `it expires ${whenText(key.expires_at)}`
    : "it never expires";
  fields.ips.value = (Array.isArray(key.allowed_ips) ? key.allowed_ips : []).join("\n");
  const rate = key.rate_limit || null;
  fields.rateDefault.checked = !rate;
  fields.rateOwn.checked = Boolean(rate);
  fields.perSecond.value = rate ? String(rate.per_second) : "";
  fields.burst.value = rate ? String(rate.burst) : "";
  syncRate(fields);
}

// What the form holds, as editChanges reads it.
function typed(fields) {
  return {
    name: fields.name.value,
    permissions: fields.boxes.filter((box) => box.checked).map((box) => box.value),
    expiry: fields.expiry.value,
    ips: fields.ips.value,
    rate: { own: fields.rateOwn.checked, perSecond: fields.perSecond.value, burst: fields.burst.value },
  };
}

// `keys`: {call, keyPath, failed, pageStatus, listTitle, list, confirmFirst, gone,
// closeDialogs, changed}.
export function editPanel(keys) {
  const fields = formFields();
  let editing = null; // the key the form is about, as listed when it was opened

  fields.rateDefault.addEventListener("change", () => syncRate(fields));
  fields.rateOwn.addEventListener("change", () => syncRate(fields));

  function open(key) {
    editing = key;
    clearProblems(fields);
    hide(keys.pageStatus);
    fill(fields, key);
    fields.submit.disabled = false;
    fields.panel.hidden = false;
    fields.title.focus();
  }

  function close() {
    editing = null;
    clearProblems(fields);
    fields.panel.hidden = true;
  }

  byId("edit-cancel").addEventListener("click", () => {
    const key = editing;
    close();
    const buttons = key && keys.list.buttonsOf(key.id);
    (buttons ? buttons.edit : keys.listTitle).focus();
  });

  async function save(key, body, report) {
    let updated;
    try {
      updated = await keys.call("PATCH", keys.keyPath(key), body);
    } catch (failure) {
      if (await keys.gone(failure)) {
        return;
      }
      if (failure instanceof ApiError && failure.code === "validation_failed") {
        keys.closeDialogs();
        fields.submit.disabled = false;
        showProblems(fields, failure);
        return;
      }
      report(keys.failed("Saving the changes", failure));
      return;
    }
    keys.closeDialogs();
    close();
    await keys.changed(`Saved the changes to the key ${updated.name || key.name}.`);
  }

  fields.form.addEventListener("submit", (event) => {
    event.preventDefault();
    const key = editing;
    if (!key) {
      return;
    }
    clearProblems(fields);
    hide(keys.pageStatus);
    const { body, cuts } = editChanges(key, typed(fields));
    if (Object.keys(body).length === 0) {
      show(fields.status, "Nothing to save: the form is as the key is.");
      return;
    }
    if (body.permissions && body.permissions.length === 0) {
      show(fields.error, "Saving the changes failed: choose at least one permission.");
      show(fields.problems.permissions.box, "Choose at least one permission.");
      fields.boxes[0].focus();
      return;
    }
    if (cuts.length === 0) {
      fields.submit.disabled = true;
      save(key, body, (text) => {
        show(fields.error, text);
        fields.submit.disabled = false;
        fields.error.scrollIntoView({ block: "nearest" });
      });
      return;
    }
    keys.confirmFirst({
      title: `Save the changes to ${key.name}?`,
      description: "From the key's next request:",
      items: cuts,
      action: "Save changes",
      run: (report) => save(key, body, report),
    });
  });

  return { open, close, isEditing: (key) => editing !== null && editing.id === key.id };
}
