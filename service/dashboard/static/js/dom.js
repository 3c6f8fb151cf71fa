// Building and updating the page. Every piece of data reaches it through textContent or an
// attribute, never as HTML: the pages' policy (Trusted Types, no inline code) refuses HTML
// strings anyway.

export function byId(id) {
  const element = document.getElementById(id);
  if (!element) {
    throw new Error(`The page has no #${id}.`);
  }
  return element;
}

export function el(tag, { text, className, attrs } = {}, children = []) {
  const element = document.createElement(tag);
  if (className) {
    element.className = className;
  }
  if (text !== undefined) {
    element.textContent = text;
  }
  for (const [name, value] of Object.entries(attrs || {})) {
    element.setAttribute(name, value);
  }
  for (const child of children) {
    element.append(child);
  }
  return element;
}

// A status line or an alert: its text, shown.
export function show(element, text) {
  element.textContent = text;
  element.hidden = false;
}

export function hide(element) {
  element.hidden = true;
  element.textContent = "";
}

// Runs forget() once the dialog has closed. Its close event comes a task after it closed,
// so a dialog opened again meanwhile (a fast Escape then Enter) keeps what it is for.
export function whenClosed(dialog, forget) {
  dialog.addEventListener("close", () => {
    if (!dialog.open) {
      forget();
    }
  });
}

// A button the page serves disabled, since a click before its script listens would do
// nothing: `click` is what it does from now, and it is enabled.
export function onClick(button, click) {
  button.addEventListener("click", click);
  button.disabled = false;
}

// A modal dialog that asks before a change, with a Cancel button and a confirming one.
// `open(run)` shows it with the focus on Cancel; the confirming button then calls
// `run(report)`, which makes the change and closes the dialog when done, or calls `report`
// with what went wrong: the dialog then says so and stays, for another try or Cancel.
export function confirmation({ dialog, cancel, confirm, error }) {
  let pending = null; // what the confirming button does, while the dialog is open

  cancel.addEventListener("click", () => dialog.close("cancel"));

  whenClosed(dialog, () => {
    pending = null;
  });

  confirm.addEventListener("click", async () => {
    const run = pending;
    if (!run) {
      return;
    }
    confirm.disabled = true;
    hide(error);
    await run((text) => {
      show(error, text);
      confirm.disabled = false;
    });
  });

  return {
    open(run) {
      pending = run;
      hide(error);
      confirm.disabled = false;
      dialog.showModal();
      cancel.focus();
    },
    close(reason) {
      dialog.close(reason);
    },
  };
}

// Hands what the page made itself (`content`, a string, typed `type`) to the browser's download
// as a file named `filename`, through a link made for it.
export function saveAsFile(content, filename, type) {
  const url = URL.createObjectURL(new Blob([content], { type }));
  const link = el("a", { attrs: { href: url, download: filename } });
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}
