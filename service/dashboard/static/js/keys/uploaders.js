// "Set up ShareX" and "curl script": a dialog that makes an uploader's key (it may only
// upload; bound to a folder when one is chosen) through POST /uploaders, saves the
// configuration the service answers (a .sxcu for ShareX, a shell script for curl) as a
// download, and shows the new key's secret once, as creating any key does.

import { ApiError, describe } from "../api.js";
import { byId, el, hide, onClick, saveAsFile, show, whenClosed } from "../dom.js";
import { folderTree } from "../folders.js";
import { nameProblem } from "./rules.js";

const KINDS = {
  sharex: {
    title: "Set up ShareX",
    about:
      "Makes a key that may only upload, and downloads a ShareX custom uploader (.sxcu) that " +
      "uses it: open the file to import it into ShareX.",
    name: "ShareX",
  },
  curl: {
    title: "Get a curl upload script",
    about:
      "Makes a key that may only upload, and downloads a shell script that uses it: " +
      "sh filehost-….sh FILE... uploads each file and prints its link.",
    name: "curl uploader",
  },
};

// `keys`: {call, secret, list, announce, failed}.
export function uploaderDialog(keys) {
  const dialog = byId("uploader-dialog");
  const form = byId("uploader-form");
  const error = byId("uploader-error");
  const submit = byId("uploader-submit");
  const name = byId("uploader-name");
  const folder = byId("uploader-folder");
  const alias = byId("uploader-alias");
  const expiry = byId("uploader-expiry");
  let kind = null;
  let opener = null;

  async function listFolders() {
    const first = el("option", { text: "Where your settings send uploads", attrs: { value: "" } });
    folder.replaceChildren(first);
    try {
      const { folders } = await folderTree(keys.call);
      folder.append(...folders.map((item) => el("option", { text: item.path, attrs: { value: item.id } })));
    } catch (failure) {
      show(error, `Listing your folders failed: ${failure instanceof ApiError ? describe(failure) : "no answer."}`);
    }
  }

  function open(chosen, button) {
    kind = chosen;
    opener = button;
    const about = KINDS[chosen];
    byId("uploader-title").textContent = about.title;
    byId("uploader-about").textContent = about.about;
    form.reset();
    name.value = about.name;
    hide(error);
    hide(keys.pageStatus);
    submit.disabled = false;
    dialog.returnValue = "";
    dialog.showModal();
    name.focus();
    name.select();
    listFolders();
  }

  for (const chosen of Object.keys(KINDS)) {
    const button = byId(`uploader-${chosen}`);
    onClick(button, () => open(chosen, button));
  }
  byId("uploader-cancel").addEventListener("click", () => dialog.close("cancel"));
  whenClosed(dialog, () => {
    if (dialog.returnValue !== "created" && opener) {
      opener.focus();
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    hide(error);
    const problem = nameProblem(name.value);
    if (problem) {
      show(error, `The name ${problem}.`);
      name.focus();
      return;
    }
    const body = { kind, name: name.value.trim(), ...(folder.value ? { folder_id: folder.value } : {}) };
    if (alias.checked) {
      body.alias = true;
    }
    if (expiry.value) {
      body.expires_days = Number(expiry.value);
    }
    submit.disabled = true;
    let made;
    try {
      made = await keys.call("POST", "/uploaders", body);
    } catch (failure) {
      show(error, keys.failed("Making the uploader", failure));
      submit.disabled = false;
      return;
    }
    dialog.close("created");
    saveAsFile(made.content, made.filename, "application/octet-stream");
    keys.secret.show(made.key, false);
    keys.announce(`Downloaded ${made.filename}, which holds the key ${made.key.name}.`);
    await keys.list.refresh();
  });

  return { dialog };
}
