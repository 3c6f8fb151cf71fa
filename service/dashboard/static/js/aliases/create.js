// Creating an alias, in a dialog opened by "Create alias": a file or a folder (listed by its
// path), an optional address (slug), an expiry and a view limit (else the account's defaults,
// which the dialog says; "no view limit" overrides a limit they set), an optional password, and
// whether it works from now. Every field is checked by the service's rules first; the service's
// refusal is shown by its field, the dialog kept as typed.

import { ApiError, describe } from "../api.js";
import { byId, el, onClick, show, whenClosed } from "../dom.js";
import { folderTree } from "../folders.js";
import { durationText, fieldProblems, passwordProblem, readSlug, readViews } from "./fields.js";

// Every file of the account (its first 1,000, newest first) by its folder's path and name, and
// every folder by its path.
async function targets(call) {
  const [tree, files] = await Promise.all([folderTree(call), call("GET", "/files?limit=1000")]);
  const pathOf = new Map(tree.folders.map((folder) => [folder.id, folder.path]));
  const listed = (Array.isArray(files.files) ? files.files : []).map((file) => ({
    id: file.id,
    text: file.folder_id && pathOf.has(file.folder_id) ? `${pathOf.get(file.folder_id)} / ${file.name}` : file.name,
  }));
  listed.sort((a, b) => a.text.localeCompare(b.text));
  return { files: listed, folders: tree.folders.map((folder) => ({ id: folder.id, text: folder.path })) };
}

// `page`: {call, announce(text), refresh()}.
export function createAliasDialog(page) {
  const dialog = byId("alias-dialog");
  const opener = byId("alias-create-open");
  const form = byId("alias-form");
  const error = byId("alias-error");
  const submit = byId("alias-submit");
  const kindFile = byId("alias-kind-file");
  const kindFolder = byId("alias-kind-folder");
  const target = byId("alias-target");
  const slug = byId("alias-slug");
  const expiry = byId("alias-expiry");
  const views = byId("alias-views");
  const noLimit = byId("alias-views-none");
  const noLimitChoice = byId("alias-views-none-choice");
  const password = byId("alias-password");
  const enabled = byId("alias-enabled");
  const problems = {
    target: { box: byId("alias-target-problem"), control: target },
    file_id: { box: byId("alias-target-problem"), control: target },
    folder_id: { box: byId("alias-target-problem"), control: target },
    slug: { box: byId("alias-slug-problem"), control: slug },
    max_views: { box: byId("alias-views-problem"), control: views },
    password: { box: byId("alias-password-problem"), control: password },
  };
  let choices = { files: [], folders: [] };

  function fillTargets() {
    const list = kindFolder.checked ? choices.folders : choices.files;
    const none = kindFolder.checked ? "No folders yet" : "No files yet";
    target.replaceChildren(
      ...(list.length
        ? list.map((item) => el("option", { text: item.text, attrs: { value: item.id } }))
        : [el("option", { text: none, attrs: { value: "" } })]),
    );
  }
  kindFile.addEventListener("change", fillTargets);
  kindFolder.addEventListener("change", fillTargets);

  const { clear: clearProblems, mark, refused } = fieldProblems(problems, error);

  // The defaults the account's settings give what is left out, said by the fields.
  async function sayDefaults() {
    const expiryHint = byId("alias-expiry-hint");
    const viewsHint = byId("alias-views-hint");
    try {
      const settings = await page.call("GET", "/settings");
      const seconds = settings.default_alias_expires_in_seconds;
      expiryHint.textContent = Number.isInteger(seconds)
        ? `Your settings: after ${durationText(seconds)}.`
        : "Your settings: never.";
      const most = settings.default_alias_max_views;
      viewsHint.textContent = `A whole number of at least 1. Empty: ${
        Number.isInteger(most) ? `your settings' limit, ${most}` : "no limit, as your settings say"
      }.`;
      // Only a limit the settings set needs a way round it.
      noLimitChoice.hidden = !Number.isInteger(most);
    } catch {
      expiryHint.textContent = "Your settings' default lifetime, set on the Settings page.";
      viewsHint.textContent = "A whole number of at least 1. Empty: your settings' default.";
      noLimitChoice.hidden = false;
    }
  }

  // No limit at all: the number has nothing to say.
  noLimit.addEventListener("change", () => {
    views.disabled = noLimit.checked;
    if (noLimit.checked) {
      views.value = "";
    }
  });

  onClick(opener, async () => {
    form.reset();
    views.disabled = false;
    noLimitChoice.hidden = true;
    clearProblems();
    submit.disabled = true;
    dialog.returnValue = "";
    target.replaceChildren(el("option", { text: "Loading…", attrs: { value: "" } }));
    dialog.showModal();
    kindFile.focus();
    sayDefaults();
    try {
      choices = await targets(page.call);
      fillTargets();
      submit.disabled = false;
    } catch (failure) {
      show(error, `Listing your files and folders failed: ${failure instanceof ApiError ? describe(failure) : "no answer."}`);
    }
  });
  byId("alias-cancel").addEventListener("click", () => dialog.close("cancel"));
  whenClosed(dialog, () => {
    password.value = "";
    if (dialog.returnValue !== "created") {
      opener.focus();
    }
  });

  // The body as typed, and what is wrong with it.
  function read() {
    const found = {};
    const body = {};
    if (!target.value) {
      found.target = kindFolder.checked ? "Choose a folder: create one on the Files page first." : "Choose a file: upload one on the Files page first.";
    } else {
      Object.assign(body, kindFolder.checked ? { folder_id: target.value } : { file_id: target.value });
    }
    const typedSlug = readSlug(slug.value);
    if (typedSlug.problem) {
      found.slug = typedSlug.problem;
    } else if (typedSlug.value) {
      body.slug = typedSlug.value;
    }
    if (expiry.value === "never") {
      body.expires_in_seconds = null;
    } else if (expiry.value !== "default") {
      body.expires_in_seconds = Number(expiry.value);
    }
    const typedViews = readViews(views.value);
    if (noLimit.checked) {
      body.max_views = null;
    } else if (typedViews.problem) {
      found.max_views = typedViews.problem;
    } else if (typedViews.value !== null) {
      body.max_views = typedViews.value;
    }
    if (password.value) {
      const problem = passwordProblem(password.value);
      if (problem) {
        found.password = problem;
      } else {
        body.password = password.value;
      }
    }
    body.enabled = enabled.checked;
    return { body, found };
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearProblems();
    const { body, found } = read();
    const count = Object.keys(found).length;
    if (count) {
      mark(found, `Nothing was created: ${count === 1 ? "one field needs" : `${count} fields need`} correcting.`);
      return;
    }
    submit.disabled = true;
    try {
      const created = await page.call("POST", "/aliases", body);
      dialog.close("created");
      page.announce(`Created the alias ${created.url}.`);
      await page.refresh();
      page.focusList();
    } catch (failure) {
      if (failure instanceof ApiError && (failure.code === "file_not_found" || failure.code === "folder_not_found")) {
        mark({ target: `${failure.message} It was deleted meanwhile: open the dialog again for the list as it is now.` }, "Nothing was created.");
      } else {
        refused(failure, "created", "Creating the alias failed.");
      }
    } finally {
      submit.disabled = false;
    }
  });

  return { dialog };
}
