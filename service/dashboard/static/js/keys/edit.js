// The panel that edits a key: its name, permissions, expiry, allowed addresses and rate
// limit. Every field is checked by the service's own rules first (rules.js), so nothing the
// server would refuse is sent or confirmed; only what differs from the key as listed is sent,
// and a change that refuses requests that work now is confirmed first. A reason the server
// still gives for a field is shown by it.

import { ApiError, problemText } from "../api.js";
import { byId, hide, show } from "../dom.js";
import { permissionGrid, revealChecked } from "../permissions.js";
import { whenText } from "../time.js";
import { editChanges } from "./changes.js";
import { folderChoice } from "./folders.js";
import {
  MAX_BURST,
  MAX_EXPIRES_DAYS,
  MAX_PER_SECOND,
  allowList,
  nameProblem,
  wholeNumber,
} from "./rules.js";

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
  fields.grid = grid;
  fields.boxes = Array.from(grid.querySelectorAll('input[type="checkbox"]'));
  fields.folders = folderChoice("edit-folders", byId("edit-folders"), byId("edit-folders-problem"));
  // Where the server's reason for each field of an edit is shown, and what gets the focus.
  fields.problems = {
    name: { box: byId("edit-name-problem"), controls: [fields.name] },
    permissions: { box: byId("edit-permissions-problem"), controls: fields.boxes },
    expires_days: { box: byId("edit-expiry-problem"), controls: [fields.expiry] },
    allowed_ips: { box: byId("edit-ips-problem"), controls: [fields.ips] },
    rate_limit: { box: byId("edit-rate-problem"), controls: [fields.perSecond, fields.burst] },
    folder_ids: {
      box: byId("edit-folders-problem"),
      get controls() {
        return fields.folders.controls();
      },
    },
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

// What is wrong with the form as typed, by the API's field names, in sentences: the service's
// own rules, so that what it would refuse is neither confirmed nor sent.
function problemsOf(fields) {
  const problems = {};
  const name = nameProblem(fields.name.value);
  if (name) {
    problems.name = `The name ${name}.`;
  }
  if (!fields.boxes.some((box) => box.checked)) {
    problems.permissions = "Choose at least one permission.";
  }
  if (fields.expiry.value.trim() !== "" && wholeNumber(fields.expiry.value, 1, MAX_EXPIRES_DAYS) === null) {
    problems.expires_days = `The new expiry must be a whole number of days from 1 to ${MAX_EXPIRES_DAYS}.`;
  }
  const addresses = allowList(fields.ips.value).problems;
  if (addresses.length) {
    problems.allowed_ips = addresses.join(" ");
  }
  if (fields.rateOwn.checked) {
    const bad = [];
    if (wholeNumber(fields.perSecond.value, 1, MAX_PER_SECOND) === null) {
      bad.push([fields.perSecond, `Requests per second must be a whole number from 1 to ${MAX_PER_SECOND}.`]);
    }
    if (wholeNumber(fields.burst.value, 1, MAX_BURST) === null) {
      bad.push([fields.burst, `Burst must be a whole number from 1 to ${MAX_BURST}.`]);
    }
    if (bad.length) {
      problems.rate_limit = { text: bad.map(([, text]) => text).join(" "), controls: bad.map(([control]) => control) };
    }
  }
  const folders = fields.folders.problem();
  if (folders) {
    problems.folder_ids = { text: folders, controls: fields.folders.controls() };
  }
  return problems;
}

// Each field's problem next to it, marked invalid (a problem may name the very controls it is
// about, {text, controls}); the first such control gets the focus.
function markProblems(fields, problems) {
  let first = null;
  for (const [field, problem] of Object.entries(problems)) {
    const place = fields.problems[field];
    const { text, controls } = typeof problem === "string" ? { text: problem, controls: place.controls } : problem;
    show(place.box, text);
    for (const control of controls) {
      control.setAttribute("aria-invalid", "true");
    }
    first = first || controls.find((control) => !control.disabled) || null;
  }
  return first;
}

// Each field's reason from a 400, next to the field; the first such field gets the focus.
// What has no field here goes with the form's error.
function showProblems(fields, failure) {
  const details =
    failure.details && typeof failure.details === "object" && !Array.isArray(failure.details)
      ? failure.details
      : {};
  const elsewhere = [];
  const placed = {};
  for (const [field, why] of Object.entries(details)) {
    const text = problemText(why);
    if (!fields.problems[field] || !text) {
      elsewhere.push(text ? `${field} ${text}` : field);
      continue;
    }
    placed[field] = `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
  }
  const first = markProblems(fields, placed);
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
  revealChecked(fields.grid); // a permission the key holds is never hidden
}

// What the form holds, as editChanges reads it.
function typed(fields) {
  return {
    name: fields.name.value,
    permissions: fields.boxes.filter((box) => box.checked).map((box) => box.value),
    expiry: fields.expiry.value,
    ips: fields.ips.value,
    rate: { own: fields.rateOwn.checked, perSecond: fields.perSecond.value, burst: fields.burst.value },
    folders: fields.folders.value(),
    pathOf: fields.folders.pathOf,
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
    fields.folders.load(keys.call, Array.isArray(key.folder_ids) ? key.folder_ids : null);
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
      if (failure instanceof ApiError && failure.code === "folder_not_found") {
        keys.closeDialogs();
        fields.submit.disabled = false;
        show(fields.error, `Saving the changes failed: ${failure.message} A folder chosen was deleted meanwhile.`);
        show(fields.problems.folder_ids.box, "A folder chosen no longer exists: choose again from the folders as they are now.");
        fields.folders.load(keys.call, []);
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
    const problems = problemsOf(fields);
    if (Object.keys(problems).length) {
      const count = Object.keys(problems).length;
      show(fields.error, `Nothing was saved: ${count === 1 ? "one field needs" : `${count} fields need`} correcting.`);
      const first = markProblems(fields, problems);
      (first || fields.error).scrollIntoView({ block: "nearest" });
      if (first) {
        first.focus();
      }
      return;
    }
    const { body, cuts } = editChanges(key, typed(fields));
    if (Object.keys(body).length === 0) {
      show(fields.status, "Nothing to save: the form is as the key is.");
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
