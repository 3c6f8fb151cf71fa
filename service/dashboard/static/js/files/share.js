// "Share" on a file or a folder: its plain public link (enabled, without a password or a view
// limit, not expired) when it has one, to copy, else an offer to make one; never a new alias per
// click.
// The dialog is made here, so the files page holds only the button that opens it. A link made
// here is plain too (the account's expiry, no view limit), so the next Share finds it.

import { ApiError, failedText } from "../api.js";
import { el, hide, show, whenClosed } from "../dom.js";

// Whether an alias is a link anyone may open as it is, now.
export function isPlain(alias, now = Date.now()) {
  const expires = typeof alias.expires_at === "string" ? Date.parse(alias.expires_at) : NaN;
  return (
    alias.enabled !== false &&
    !alias.password_protected &&
    !Number.isInteger(alias.max_views) &&
    (Number.isNaN(expires) || expires > now)
  );
}

function shareDialog() {
  const title = el("h2", { attrs: { id: "share-title" } });
  const said = el("p", { attrs: { id: "share-said" } });
  const link = el("a", { attrs: { id: "share-link", target: "_blank", rel: "noopener noreferrer" } });
  const linkBox = el("div", { className: "alias-link share-link" }, [link]);
  const copied = el("p", { className: "copy-status", attrs: { id: "share-copy-status", role: "status" } });
  const error = el("p", { className: "error", attrs: { id: "share-error", role: "alert" } });
  error.hidden = true;
  const close = el("button", { text: "Close", className: "secondary", attrs: { type: "button" } });
  const make = el("button", { text: "Make a link", className: "primary", attrs: { type: "button" } });
  const copy = el("button", { text: "Copy link", className: "primary", attrs: { type: "button" } });
  const dialog = el(
    "dialog",
    { className: "wide", attrs: { id: "share-dialog", "aria-labelledby": "share-title", "aria-describedby": "share-said" } },
    [title, said, error, linkBox, copied, el("div", { className: "actions" }, [close, make, copy])],
  );
  document.body.append(dialog);
  close.addEventListener("click", () => dialog.close("cancel"));
  return { dialog, title, said, link, linkBox, copied, error, make, copy };
}

// What a link to `item` gives whoever holds it, and how the service says it is gone.
function kindOf(item) {
  return String(item.id).startsWith("fld_")
    ? { field: "folder_id", gone: "folder_not_found", opens: "open the folder and everything in it" }
    : { field: "file_id", gone: "file_not_found", opens: "open the file" };
}

// `share(item, button)`: looks the file's or folder's aliases up, then shows the dialog. One
// deleted meanwhile (the service's 404 when making its link) closes the dialog for `gone(item)`.
export function shareAction(call, pageError, gone) {
  let parts = null;
  let opener = null;
  let current = null; // the file or folder the dialog is about

  function showLink(alias, fresh) {
    const { opens } = kindOf(current);
    parts.said.textContent = fresh
      ? `Made a public link to ${current.name}: anyone with it can ${opens}.`
      : `${current.name} has a public link already: anyone with it can ${opens}. The Aliases page edits it.`;
    parts.link.textContent = alias.url;
    parts.link.setAttribute("href", alias.url);
    parts.linkBox.hidden = false;
    parts.make.hidden = true;
    parts.copy.hidden = false;
    parts.copy.focus();
  }

  function offer() {
    parts.said.textContent =
      `${current.name} has no public link that works as it is (enabled, without a password or a view limit). ` +
      "Make one? It takes your settings' expiry.";
    parts.linkBox.hidden = true;
    parts.make.hidden = false;
    parts.copy.hidden = true;
    parts.make.focus();
  }

  function build() {
    parts = shareDialog();
    whenClosed(parts.dialog, () => {
      if (opener && opener.isConnected) {
        opener.focus();
      }
    });
    parts.copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(parts.link.textContent);
        parts.copied.textContent = `Copied ${parts.link.textContent} to the clipboard.`;
      } catch {
        window.getSelection().selectAllChildren(parts.link);
        parts.copied.textContent = "Copying was blocked: the link is selected, copy it with Ctrl+C.";
      }
    });
    parts.make.addEventListener("click", async () => {
      parts.make.disabled = true;
      hide(parts.error);
      try {
        const kind = kindOf(current);
        const made = await call("POST", "/aliases", { [kind.field]: current.id, max_views: null });
        showLink(made, true);
      } catch (failure) {
        if (failure instanceof ApiError && failure.code === kindOf(current).gone) {
          parts.dialog.close();
          gone(current);
          return;
        }
        show(parts.error, failedText(`Making a link to ${current.name}`, failure));
      } finally {
        parts.make.disabled = false;
      }
    });
  }

  return async (file, button) => {
    button.disabled = true;
    hide(pageError);
    let aliases;
    try {
      const query = new URLSearchParams({ target_id: file.id, limit: "1000" });
      const data = await call("GET", `/aliases?${query}`);
      aliases = Array.isArray(data.aliases) ? data.aliases : [];
    } catch (failure) {
      show(pageError, failedText(`Looking up the links to ${file.name}`, failure));
      return;
    } finally {
      button.disabled = false;
    }
    if (!parts) {
      build();
    }
    current = file;
    opener = button;
    parts.title.textContent = `Share ${file.name}`;
    parts.copied.textContent = "";
    hide(parts.error);
    parts.dialog.showModal();
    const plain = aliases.find((alias) => isPlain(alias));
    if (plain) {
      showLink(plain, false);
    } else {
      offer();
    }
  };
}
