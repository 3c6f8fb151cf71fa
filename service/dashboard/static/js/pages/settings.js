// The settings page (/settings): the account's platform settings, each with what it changes,
// checked by the service's own rules before anything is sent; only what differs from the saved
// values is sent, and a reason the service still gives for a field is shown by that field. Below
// them, what the account holds against the service's limits (settings/usage.js).

import { ApiError, failedText, problemText } from "../api.js";
import { sessionCaller } from "../caller.js";
import { byId, el, hide, show } from "../dom.js";
import { folderTree } from "../folders.js";
import { signedInFrame } from "../layout.js";
import { requireSession } from "../session.js";
import { showUsage } from "../settings/usage.js";

const MAX_KEY_DAYS = 3650;
const MIN_ALIAS_SECONDS = 60;
// The service's longest default alias lifetime: ten years.
const MAX_ALIAS_SECONDS = 3650 * 86400;
// Whole numbers past this are refused by the service whatever the setting.
const LARGEST = 2 ** 53;
const UNITS = [
  [86400, "days"],
  [3600, "hours"],
  [60, "minutes"],
  [1, "seconds"],
];

// A whole number as typed, or undefined when it is not one ("" is null: not set).
function typedNumber(text) {
  const trimmed = text.trim();
  if (trimmed === "") {
    return null;
  }
  return /^\d{1,16}$/.test(trimmed) ? Number(trimmed) : undefined;
}

function fieldsOf() {
  const fields = {
    form: byId("settings-form"),
    loading: byId("settings-loading"),
    status: byId("settings-status"),
    error: byId("settings-error"),
    submit: byId("settings-submit"),
    keyDays: byId("setting-key-expiry"),
    folder: byId("setting-folder"),
    aliasAmount: byId("setting-alias-expiry-amount"),
    aliasUnit: byId("setting-alias-expiry-unit"),
    aliasViews: byId("setting-alias-views"),
    public: byId("setting-public"),
  };
  // Where each setting's problem is shown, and which controls it marks.
  fields.problems = {
    default_key_expires_days: { box: byId("setting-key-expiry-problem"), controls: [fields.keyDays] },
    default_folder_id: { box: byId("setting-folder-problem"), controls: [fields.folder] },
    default_alias_expires_in_seconds: {
      box: byId("setting-alias-expiry-problem"),
      controls: [fields.aliasAmount, fields.aliasUnit],
    },
    default_alias_max_views: { box: byId("setting-alias-views-problem"), controls: [fields.aliasViews] },
    public_aliases_enabled: { box: byId("setting-public-problem"), controls: [fields.public] },
  };
  return fields;
}

// The folder choice: the top level, then every folder by its path (and the saved one even
// when it was not listed).
function folderOptions(fields, folders, cut, saved) {
  const options = [el("option", { text: "The top level (no folder)", attrs: { value: "" } })];
  for (const folder of folders) {
    options.push(el("option", { text: folder.path, attrs: { value: folder.id } }));
  }
  if (saved && !folders.some((folder) => folder.id === saved)) {
    options.push(el("option", { text: `Folder ${saved}`, attrs: { value: saved } }));
  }
  if (cut) {
    options.push(el("option", { text: "(more folders than can be listed)", attrs: { value: "", disabled: "" } }));
  }
  fields.folder.replaceChildren(...options);
}

function fill(fields, values) {
  const days = values.default_key_expires_days;
  fields.keyDays.value = Number.isInteger(days) ? String(days) : "";
  fields.folder.value = values.default_folder_id || "";
  const seconds = values.default_alias_expires_in_seconds;
  if (Number.isInteger(seconds)) {
    const [unit] = UNITS.find(([size]) => seconds % size === 0);
    if (!fields.aliasUnit.querySelector(`option[value="${unit}"]`)) {
      fields.aliasUnit.append(el("option", { text: "seconds", attrs: { value: String(unit) } }));
    }
    fields.aliasUnit.value = String(unit);
    fields.aliasAmount.value = String(seconds / unit);
  } else {
    fields.aliasUnit.value = "86400";
    fields.aliasAmount.value = "";
  }
  const views = values.default_alias_max_views;
  fields.aliasViews.value = Number.isInteger(views) ? String(views) : "";
  fields.public.checked = values.public_aliases_enabled !== false;
}

// The form as the API's values, and what is wrong with it, in the service's words.
function read(fields) {
  const values = {};
  const problems = {};
  const days = typedNumber(fields.keyDays.value);
  if (days === undefined || (days !== null && (days < 1 || days > MAX_KEY_DAYS))) {
    problems.default_key_expires_days = `A whole number of days from 1 to ${MAX_KEY_DAYS}, or empty.`;
  } else {
    values.default_key_expires_days = days;
  }
  values.default_folder_id = fields.folder.value || null;
  const amount = typedNumber(fields.aliasAmount.value);
  const seconds = amount === null || amount === undefined ? amount : amount * Number(fields.aliasUnit.value);
  if (seconds === undefined || (seconds !== null && (seconds < MIN_ALIAS_SECONDS || seconds > MAX_ALIAS_SECONDS))) {
    problems.default_alias_expires_in_seconds = "A whole number, from 1 minute to 3650 days in all, or empty.";
  } else {
    values.default_alias_expires_in_seconds = seconds;
  }
  const views = typedNumber(fields.aliasViews.value);
  if (views === undefined || (views !== null && (views < 1 || views > LARGEST))) {
    problems.default_alias_max_views = "A whole number of at least 1, or empty.";
  } else {
    values.default_alias_max_views = views;
  }
  values.public_aliases_enabled = fields.public.checked;
  return { values, problems };
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

// Each problem by its field, marked invalid; the first such field gets the focus. Problems
// about no field here (a setting this page does not know) go with the form's error.
function markProblems(fields, problems, lead) {
  let first = null;
  const elsewhere = [];
  for (const [name, text] of Object.entries(problems)) {
    const place = fields.problems[name];
    if (!place) {
      elsewhere.push(`${name} ${text}`);
      continue;
    }
    show(place.box, text);
    for (const control of place.controls) {
      control.setAttribute("aria-invalid", "true");
    }
    first = first || place.controls[0];
  }
  show(fields.error, elsewhere.length ? `${lead} ${elsewhere.join("; ")}.` : lead);
  (first || fields.error).scrollIntoView({ block: "nearest" });
  if (first) {
    first.focus();
  }
}

// "the default folder for uploads", for the line that says what was saved.
const NAMES = {
  default_key_expires_days: "the default key lifetime",
  default_folder_id: "the default folder for uploads",
  default_alias_expires_in_seconds: "the default alias lifetime",
  default_alias_max_views: "the default alias view limit",
  public_aliases_enabled: "public aliases",
};

function start(session) {
  const call = sessionCaller(session.token);
  signedInFrame("settings", session, { call });
  const pageError = byId("page-error");
  const fields = fieldsOf();
  let saved = null; // the values as the service last answered them

  async function load() {
    try {
      const [values, tree] = await Promise.all([call("GET", "/settings"), folderTree(call)]);
      saved = values;
      folderOptions(fields, tree.folders, tree.cut, values.default_folder_id);
      fill(fields, values);
      fields.form.hidden = false;
    } catch (failure) {
      show(pageError, failedText("Loading your settings", failure));
    } finally {
      fields.loading.hidden = true;
    }
  }

  // Changes not saved yet: leaving the page asks first.
  window.addEventListener("beforeunload", (event) => {
    if (!saved || fields.form.hidden) {
      return;
    }
    const { values, problems } = read(fields);
    const changed = Object.entries(values).some(([name, value]) => value !== (saved[name] ?? null));
    if (changed || Object.keys(problems).length) {
      event.preventDefault();
      event.returnValue = "";
    }
  });

  byId("settings-reset").addEventListener("click", () => {
    clearProblems(fields);
    if (saved) {
      fill(fields, saved);
    }
  });

  fields.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!saved) {
      return;
    }
    clearProblems(fields);
    const { values, problems } = read(fields);
    const count = Object.keys(problems).length;
    if (count) {
      markProblems(fields, problems, `Nothing was saved: ${count === 1 ? "one setting needs" : `${count} settings need`} correcting.`);
      return;
    }
    const body = {};
    for (const [name, value] of Object.entries(values)) {
      if (value !== (saved[name] ?? null)) {
        body[name] = value;
      }
    }
    if (Object.keys(body).length === 0) {
      show(fields.status, "Nothing to save: the settings are as saved.");
      return;
    }
    fields.submit.disabled = true;
    try {
      saved = await call("PATCH", "/settings", body);
      fill(fields, saved);
      const names = Object.keys(body).map((name) => NAMES[name] || name);
      show(fields.status, `Saved ${names.join(", ")}.`);
    } catch (failure) {
      if (failure instanceof ApiError && failure.code === "validation_failed" && failure.details) {
        const reasons = {};
        for (const [name, why] of Object.entries(failure.details)) {
          const text = problemText(why);
          reasons[name] = text ? `${text.charAt(0).toUpperCase()}${text.slice(1)}.` : failure.message;
        }
        const refused = Object.keys(reasons).length;
        markProblems(fields, reasons, `Nothing was saved: ${refused === 1 ? "one setting needs" : `${refused} settings need`} correcting.`);
      } else {
        show(fields.error, failedText("Saving the settings", failure));
        fields.error.scrollIntoView({ block: "nearest" });
      }
    } finally {
      fields.submit.disabled = false;
    }
  });

  load();
  showUsage(call);
}

const session = requireSession("Sign in to change your settings.");
if (session) {
  start(session);
}
