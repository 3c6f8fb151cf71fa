// Editing an alias, in a dialog opened by its row's "Edit": its address, its expiry (kept, none,
// or counted from now), its view limit (empty: none), its password (kept, set or changed,
// removed) and whether it works. Checked by the create dialog's rules (fields.js) first; only
// what changed is sent, in one PATCH; the service's refusal is shown by its field.

import { ApiError } from "../api.js";
import { byId, whenClosed } from "../dom.js";
import { whenText } from "../time.js";
import { fieldProblems, passwordProblem, readSlug, readViews } from "./fields.js";

// `page`: {call, announce(text), refresh(), focusList()}. Returns `open(alias)`.
export function editAliasDialog(page) {
  const dialog = byId("alias-edit-dialog");
  const form = byId("alias-edit-form");
  const submit = byId("alias-edit-submit");
  const slug = byId("alias-edit-slug");
  const expiry = byId("alias-edit-expiry");
  const keepExpiry = byId("alias-edit-expiry-keep");
  const views = byId("alias-edit-views");
  const keepPassword = byId("alias-edit-password-keep");
  const setPassword = byId("alias-edit-password-set");
  const removePassword = byId("alias-edit-password-remove");
  const password = byId("alias-edit-password");
  const enabled = byId("alias-edit-enabled");
  const { clear, mark, refused } = fieldProblems(
    {
      slug: { box: byId("alias-edit-slug-problem"), control: slug },
      max_views: { box: byId("alias-edit-views-problem"), control: views },
      password: { box: byId("alias-edit-password-problem"), control: password },
    },
    byId("alias-edit-error"),
  );
  let editing = null;
  let opener = null;

  function passwordChoice() {
    password.disabled = !setPassword.checked;
    if (!setPassword.checked) {
      password.value = "";
    }
  }
  for (const radio of [keepPassword, setPassword, removePassword]) {
    radio.addEventListener("change", passwordChoice);
  }

  byId("alias-edit-cancel").addEventListener("click", () => dialog.close("cancel"));
  whenClosed(dialog, () => {
    password.value = "";
    if (dialog.returnValue !== "saved" && opener && opener.isConnected) {
      opener.focus();
    }
  });

  // What changed, as the PATCH body, and what is wrong with it.
  function read(alias) {
    const found = {};
    const body = {};
    const typedSlug = readSlug(slug.value);
    if (typedSlug.problem || !typedSlug.value) {
      found.slug = typedSlug.problem || "3 to 64 letters, digits, - or _.";
    } else if (typedSlug.value !== alias.slug) {
      body.slug = typedSlug.value;
    }
    if (expiry.value === "never") {
      if (alias.expires_at !== null) {
        body.expires_in_seconds = null;
      }
    } else if (expiry.value !== "keep") {
      body.expires_in_seconds = Number(expiry.value);
    }
    const typedViews = readViews(views.value);
    if (typedViews.problem) {
      found.max_views = typedViews.problem;
    } else if (typedViews.value !== (Number.isInteger(alias.max_views) ? alias.max_views : null)) {
      body.max_views = typedViews.value;
    }
    if (setPassword.checked) {
      const problem = password.value ? passwordProblem(password.value) : "Type the new password, or keep the one there is.";
      if (problem) {
        found.password = problem;
      } else {
        body.password = password.value;
      }
    } else if (removePassword.checked && alias.password_protected) {
      body.password = null;
    }
    if (enabled.checked !== (alias.enabled !== false)) {
      body.enabled = enabled.checked;
    }
    return { body, found };
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const alias = editing;
    if (!alias) {
      return;
    }
    clear();
    const { body, found } = read(alias);
    const count = Object.keys(found).length;
    if (count) {
      mark(found, `Nothing was changed: ${count === 1 ? "one field needs" : `${count} fields need`} correcting.`);
      return;
    }
    if (Object.keys(body).length === 0) {
      dialog.close("cancel");
      page.announce(`Nothing to change in the alias ${alias.slug}.`);
      return;
    }
    submit.disabled = true;
    try {
      const changed = await page.call("PATCH", `/aliases/${encodeURIComponent(alias.id)}`, body);
      dialog.close("saved");
      page.announce(`Saved the alias ${changed.url}.`);
      await page.refresh();
      page.focusList();
    } catch (failure) {
      if (failure instanceof ApiError && failure.code === "alias_not_found") {
        dialog.close("gone");
        page.announce(failure.message);
        await page.refresh();
      } else {
        refused(failure, "changed", "Changing the alias failed.");
      }
    } finally {
      submit.disabled = false;
    }
  });

  return (alias, button) => {
    editing = alias;
    opener = button;
    form.reset();
    clear();
    byId("alias-edit-name").textContent = alias.slug;
    slug.value = alias.slug;
    keepExpiry.textContent = `As now: ${whenText(alias.expires_at)}`;
    expiry.value = "keep";
    views.value = Number.isInteger(alias.max_views) ? String(alias.max_views) : "";
    byId("alias-edit-views-hint").textContent =
      `A whole number of at least 1; empty for no limit. Views so far: ${Number.isInteger(alias.views) ? alias.views : 0}.`;
    const protectedNow = Boolean(alias.password_protected);
    byId("alias-edit-password-keep-text").textContent = protectedNow ? "Keep the password" : "No password";
    byId("alias-edit-password-set-text").textContent = protectedNow ? "Change it" : "Set one";
    byId("alias-edit-password-remove-choice").hidden = !protectedNow;
    keepPassword.checked = true;
    passwordChoice();
    enabled.checked = alias.enabled !== false;
    submit.disabled = false;
    dialog.returnValue = "";
    dialog.showModal();
    slug.focus();
  };
}
