// filehost dashboard: the login page (/), the API keys page (/keys: create, edit, roll, disable,
// enable and revoke), the files page (/files), the sessions page (/sessions, with the password
// change) and the activity page (/activity, the account's audit trail).
// Plain JavaScript, no build step, no dependencies.
//
// The session token is kept in sessionStorage (this tab only, gone when the tab closes), sent
// only in the Authorization header, and never put in a URL or written to the console. A new
// key's secret (created or rolled) lives only in the page's memory (one input's value) until it
// is dismissed or the page is left; passwords live only in their form fields, emptied as soon as they are sent. Every piece of data reaches the page through textContent, never as HTML.
"use strict";

(() => {
  const API = "/api/v1";
  const SESSION_KEY = "filehost.session";
  const NOTICE_KEY = "filehost.notice";
  // Answers that mean the session is no longer usable: back to the login page.
  const SESSION_ENDED = new Set([
    "credential_missing",
    "invalid_session",
    "session_expired",
    "account_gone",
    "unsupported_auth_scheme",
  ]);

  class ApiError extends Error {
    constructor(status, code, message, details, retryAfter) {
      super(message);
      this.status = status;
      this.code = code;
      this.details = details;
      this.retryAfter = retryAfter; // whole seconds from Retry-After, or null
    }
  }

  // -- session storage -----------------------------------------------------------------------

  function loadSession() {
    try {
      const session = JSON.parse(sessionStorage.getItem(SESSION_KEY) || "null");
      if (session && typeof session.token === "string" && session.token) {
        return session;
      }
    } catch {
      // unreadable: treat as signed out
    }
    return null;
  }

  function saveSession(session) {
    sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
  }

  function clearSession() {
    sessionStorage.removeItem(SESSION_KEY);
  }

  // Leave for the login page, which shows `notice` once.
  function toLogin(notice) {
    clearSession();
    if (notice) {
      sessionStorage.setItem(NOTICE_KEY, JSON.stringify(notice));
    }
    window.location.replace("/");
  }

  function takeNotice() {
    const raw = sessionStorage.getItem(NOTICE_KEY);
    sessionStorage.removeItem(NOTICE_KEY);
    try {
      const notice = JSON.parse(raw || "null");
      return notice && typeof notice.text === "string" ? notice : null;
    } catch {
      return null;
    }
  }

  // -- the API -------------------------------------------------------------------------------

  // The one place the token goes anywhere: the Authorization header of a request.
  function withToken(headers, token) {
    if (token) {
      headers.Authorization = `Bearer ${token}`;
    }
    return headers;
  }

  // An error envelope (or what stands for one) as an ApiError.
  function refusal(status, payload, retryAfterHeader) {
    const error = payload && payload.error ? payload.error : {};
    const retryAfter = /^\d{1,6}$/.test(retryAfterHeader || "") ? Number(retryAfterHeader) : null;
    return new ApiError(
      status,
      typeof error.code === "string" ? error.code : "unexpected_response",
      typeof error.message === "string" && error.message
        ? error.message
        : `The service answered with status ${status}.`,
      error.details,
      retryAfter,
    );
  }

  async function api(method, path, { token, body } = {}) {
    const headers = withToken({ Accept: "application/json" }, token);
    const init = { method, headers, credentials: "omit", cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(API + path, init);
    } catch {
      throw new ApiError(0, "network_error", "The service could not be reached. Try again.");
    }
    let payload = null;
    try {
      payload = await response.json();
    } catch {
      payload = null;
    }
    if (response.ok && payload && payload.success === true) {
      return payload.data;
    }
    throw refusal(response.status, payload, response.headers.get("Retry-After"));
  }

  function sessionEnded(error) {
    return error instanceof ApiError && error.status === 401 && SESSION_ENDED.has(error.code);
  }

  // -- small DOM helpers ---------------------------------------------------------------------

  function byId(id) {
    const element = document.getElementById(id);
    if (!element) {
      throw new Error(`The page has no #${id}.`);
    }
    return element;
  }

  function el(tag, { text, className, attrs } = {}, children = []) {
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

  function show(element, text) {
    element.textContent = text;
    element.hidden = false;
  }

  // Runs forget() once the dialog has closed. Its close event comes a task after it closed,
  // so a dialog opened again meanwhile (a fast Escape then Enter) keeps what it is for.
  function whenClosed(dialog, forget) {
    dialog.addEventListener("close", () => {
      if (!dialog.open) {
        forget();
      }
    });
  }

  function hide(element) {
    element.hidden = true;
    element.textContent = "";
  }

  // The envelope's message, and what each field was refused for when the API says.
  function describe(error) {
    const details = error.details;
    if (!details || typeof details !== "object" || Array.isArray(details)) {
      return error.message;
    }
    const reasons = [];
    for (const [field, why] of Object.entries(details)) {
      const text = problemText(why);
      if (text) {
        reasons.push(`${field} ${text}`);
      }
    }
    return reasons.length ? `${error.message} ${reasons.join("; ")}.` : error.message;
  }

  // What a reason in an error's details says, whatever its shape: a sentence, an object with a
  // reason, or (a field made of fields, like a key's rate limit) each part's own reason.
  function problemText(why) {
    if (typeof why === "string") {
      return why;
    }
    if (!why || typeof why !== "object" || Array.isArray(why)) {
      return "";
    }
    if (typeof why.reason === "string") {
      return why.reason;
    }
    return Object.entries(why)
      .map(([part, reason]) => {
        const text = problemText(reason);
        return text ? `${part} ${text}` : "";
      })
      .filter((text) => text)
      .join("; ");
  }

  function when(iso, never) {
    if (!iso) {
      return document.createTextNode(never);
    }
    // "2025-01-31T12:34:56Z" -> "2025-01-31 12:34 UTC": unambiguous, and the same everywhere.
    const text = /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(iso)
      ? `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`
      : iso;
    return el("time", { text, attrs: { datetime: iso } });
  }

  // -- the login page ------------------------------------------------------------------------

  function initLogin() {
    if (loadSession()) {
      window.location.replace("/keys");
      return;
    }
    const form = byId("login-form");
    const email = byId("login-email");
    const password = byId("login-password");
    const submit = byId("login-submit");
    const error = byId("login-error");
    const notice = byId("notice");

    const pending = takeNotice();
    if (pending) {
      notice.setAttribute("role", pending.kind === "error" ? "alert" : "status");
      notice.classList.toggle("is-error", pending.kind === "error");
      show(notice, pending.text);
    }

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      hide(error);
      const address = email.value.trim();
      if (!address || !password.value) {
        show(error, "Enter your email and your password.");
        (address ? password : email).focus();
        return;
      }
      submit.disabled = true;
      submit.textContent = "Signing in…";
      try {
        const data = await api("POST", "/auth/login", {
          body: { email: address, password: password.value },
        });
        password.value = "";
        saveSession({ token: data.token, email: data.user.email });
        window.location.assign("/keys");
      } catch (failure) {
        hide(notice);
        show(error, failure instanceof ApiError ? describe(failure) : "Signing in failed.");
        password.value = "";
        password.focus();
        submit.disabled = false;
        submit.textContent = "Sign in";
      }
    });
  }

  // -- the API keys page ---------------------------------------------------------------------

  // "2025-01-31T12:34:56Z" -> "2025-01-31 12:34 UTC", as `when` shows it, for a sentence.
  function whenText(iso) {
    return when(iso, "never").textContent;
  }

  // The allow-list as typed: one entry per line, or separated by commas (or spaces).
  function addressList(text) {
    return text.split(/[\s,]+/).filter((item) => item !== "");
  }

  // Only to compare with the stored list (which the server writes with a prefix length): a
  // plain address is its own network. Whatever is sent is what was typed.
  function asNetwork(entry) {
    if (entry.includes("/")) {
      return entry.toLowerCase();
    }
    return `${entry.toLowerCase()}/${entry.includes(":") ? 128 : 32}`;
  }

  // A whole number as typed ("20" -> 20); anything else is sent as typed, so that the server
  // refuses it in its own words.
  function wholeNumber(text) {
    const trimmed = text.trim();
    return /^\d{1,9}$/.test(trimmed) ? Number(trimmed) : trimmed;
  }

  function rateText(rate) {
    return rate ? `${rate.per_second} per second, burst ${rate.burst}` : "the service's default";
  }

  function sameRate(a, b) {
    if (!a || !b) {
      return !a && !b;
    }
    return a.per_second === b.per_second && a.burst === b.burst;
  }

  function initKeys() {
    const session = loadSession();
    if (!session) {
      toLogin({ kind: "info", text: "Sign in to manage your API keys." });
      return;
    }
    const token = session.token;

    const pageStatus = byId("page-status");
    const pageError = byId("page-error");
    const createForm = byId("create-form");
    const createError = byId("create-error");
    const createSubmit = byId("create-submit");
    const nameInput = byId("key-name");
    const expiry = byId("key-expiry");
    const secretPanel = byId("new-secret");
    const secretTitle = byId("new-secret-title");
    const secretLead = byId("new-secret-lead");
    const secretName = byId("new-secret-name");
    const secretValue = byId("new-secret-value");
    const secretGrace = byId("new-secret-grace");
    const copyButton = byId("copy-secret");
    const copyStatus = byId("copy-status");
    const table = byId("keys-table");
    const tbody = byId("keys-body");
    const loading = byId("keys-loading");
    const empty = byId("keys-empty");
    const listError = byId("keys-error");
    const listTitle = byId("keys-title");
    const dialog = byId("revoke-dialog");
    const revokeName = byId("revoke-name");
    const revokePrefix = byId("revoke-prefix");
    const revokeError = byId("revoke-error");
    const revokeConfirm = byId("revoke-confirm");
    const revokeCancel = byId("revoke-cancel");
    const editPanel = byId("edit-panel");
    const editTitle = byId("edit-title");
    const editTitleName = byId("edit-title-name");
    const editForm = byId("edit-form");
    const editError = byId("edit-error");
    const editStatus = byId("edit-status");
    const editName = byId("edit-name");
    const editPermissions = byId("edit-permissions");
    const editExpiry = byId("edit-expiry");
    const editExpiryCurrent = byId("edit-expiry-current");
    const editIps = byId("edit-ips");
    const rateDefault = byId("edit-rate-default");
    const rateOwn = byId("edit-rate-own");
    const ratePerSecond = byId("edit-rate-per-second");
    const rateBurst = byId("edit-rate-burst");
    const editSubmit = byId("edit-submit");
    const rollDialog = byId("roll-dialog");
    const rollName = byId("roll-name");
    const rollPrefix = byId("roll-prefix");
    const rollForm = byId("roll-form");
    const rollError = byId("roll-error");
    const rollSubmit = byId("roll-submit");
    const confirmDialog = byId("confirm-dialog");
    const confirmTitle = byId("confirm-title");
    const confirmDescription = byId("confirm-description");
    const confirmList = byId("confirm-list");
    const confirmError = byId("confirm-error");
    const confirmOk = byId("confirm-ok");
    const confirmCancel = byId("confirm-cancel");
    let revoking = null; // the key the revoke dialog is about
    let rolling = null; // the key the roll dialog is about
    let confirming = null; // what the confirmation's button does
    let editing = null; // the key the edit form is about, as listed when it was opened
    const rowButtons = new Map(); // key id -> its row's buttons, to give the focus back

    byId("account-email").textContent = session.email || "";

    // The edit form's permissions are the create form's checkboxes, copied: one list in the page.
    function copyPermissions() {
      const grid = createForm.querySelector(".perm-grid").cloneNode(true);
      for (const element of grid.querySelectorAll("[id]")) {
        element.id = `edit-${element.id}`;
      }
      for (const label of grid.querySelectorAll("label[for]")) {
        label.htmlFor = `edit-${label.htmlFor}`;
      }
      for (const element of grid.querySelectorAll("[aria-describedby]")) {
        const ids = element.getAttribute("aria-describedby").split(/\s+/);
        element.setAttribute("aria-describedby", ids.map((id) => `edit-${id}`).join(" "));
      }
      const boxes = Array.from(grid.querySelectorAll('input[type="checkbox"]'));
      for (const box of boxes) {
        box.name = "edit-permissions";
        box.checked = false;
      }
      editPermissions.insertBefore(grid, byId("edit-permissions-problem"));
      return boxes;
    }
    const editBoxes = copyPermissions();

    // Where the server's reason for each field of an edit is shown, and what gets the focus.
    const fieldProblems = {
      name: { box: byId("edit-name-problem"), controls: [editName] },
      permissions: { box: byId("edit-permissions-problem"), controls: editBoxes },
      expires_days: { box: byId("edit-expiry-problem"), controls: [editExpiry] },
      allowed_ips: { box: byId("edit-ips-problem"), controls: [editIps] },
      rate_limit: { box: byId("edit-rate-problem"), controls: [ratePerSecond, rateBurst] },
    };

    // Any call that finds the session gone sends the user back to sign in, saying why.
    async function call(method, path, body) {
      try {
        return await api(method, path, { token, body });
      } catch (failure) {
        if (sessionEnded(failure)) {
          toLogin({ kind: "error", text: `You have been signed out. ${failure.message}` });
          // Never settles: the page is being replaced.
          return new Promise(() => {});
        }
        throw failure;
      }
    }

    function announce(text) {
      show(pageStatus, text);
    }

    function failed(what, failure) {
      const why = failure instanceof ApiError ? describe(failure) : "No answer.";
      const retry =
        failure instanceof ApiError && failure.retryAfter ? ` Try again in ${failure.retryAfter} s.` : "";
      return `${what} failed: ${why}${retry}`;
    }

    function keyPath(key) {
      return `/keys/${encodeURIComponent(key.id)}`;
    }

    // -- list

    function keyRow(key) {
      const disabled = key.enabled === false;
      const permissions = el(
        "ul",
        { className: "perm-list", attrs: { "aria-label": "Permissions" } },
        (key.permissions || []).map((name) => el("li", { text: name })),
      );
      const allowed = Array.isArray(key.allowed_ips) ? key.allowed_ips : [];
      const where = allowed.length
        ? el(
            "ul",
            { className: "ip-list", attrs: { "aria-label": "Allowed from" } },
            allowed.map((network) => el("li", {}, [el("code", { text: network })])),
          )
        : document.createTextNode("Anywhere");
      const prefix = [el("code", { text: key.key_prefix })];
      if (key.previous_secret_expires_at) {
        prefix.push(
          el("p", { className: "grace" }, [
            "Old secret works until ",
            when(key.previous_secret_expires_at, "—"),
          ]),
        );
      }
      // Every button names its key, for a screen reader's list of buttons.
      const button = (text, className, action) => {
        const made = el("button", { text, className, attrs: { type: "button" } }, [
          el("span", { text: ` key ${key.name}`, className: "visually-hidden" }),
        ]);
        made.dataset.action = action;
        return made;
      };
      const edit = button("Edit", "secondary", "edit");
      edit.addEventListener("click", () => openEdit(key));
      const roll = button("Roll", "secondary", "roll");
      roll.addEventListener("click", () => openRoll(key));
      const toggle = disabled ? button("Enable", "secondary", "enable") : button("Disable", "danger", "disable");
      toggle.addEventListener("click", () => toggleKey(key, toggle));
      const revoke = button("Revoke", "danger", "revoke");
      revoke.dataset.keyId = key.id;
      revoke.addEventListener("click", () => openRevoke(key));
      rowButtons.set(key.id, { edit, roll, toggle, revoke });
      const cell = (label, className, content) =>
        el("td", { className, attrs: { "data-label": label } }, Array.isArray(content) ? content : [content]);
      const status = el("span", {
        className: disabled ? "badge is-off" : "badge is-on",
        text: disabled ? "Disabled" : "Enabled",
      });
      const row = el("tr", {}, [
        cell("Name", "key-name", document.createTextNode(key.name)),
        cell("Status", "key-status", status),
        cell("Prefix", "key-prefix", prefix),
        cell("Permissions", "key-permissions", permissions),
        cell("Allowed from", "key-allowed", where),
        cell("Rate limit", "key-rate", document.createTextNode(key.rate_limit ? rateText(key.rate_limit) : "Default")),
        cell("Created", "key-created", when(key.created_at, "—")),
        cell("Expires", "key-expires", when(key.expires_at, "Never")),
        cell("Last used", "key-last-used", when(key.last_used_at, "Never")),
        cell("Actions", "key-actions", el("div", { className: "row-actions" }, [edit, roll, toggle, revoke])),
      ]);
      row.dataset.keyId = key.id;
      if (disabled) {
        row.className = "is-disabled";
      }
      return row;
    }

    async function refresh() {
      hide(listError);
      try {
        const data = await call("GET", "/keys");
        const keys = Array.isArray(data.keys) ? data.keys : [];
        rowButtons.clear();
        tbody.replaceChildren(...keys.map(keyRow));
        table.hidden = keys.length === 0;
        empty.hidden = keys.length !== 0;
      } catch (failure) {
        show(listError, failure instanceof ApiError ? describe(failure) : "Loading keys failed.");
      } finally {
        loading.hidden = true;
      }
    }

    // After a change: say what was done, show the list as it now is, and put the focus on it.
    async function changed(text) {
      announce(text);
      await refresh();
      listTitle.focus();
    }

    function closeDialogs() {
      for (const open of [rollDialog, confirmDialog, dialog]) {
        if (open.open) {
          open.close("done");
        }
      }
    }

    // A key revoked meanwhile (elsewhere, or reported leaked): say so and show the list as it is.
    async function gone(failure) {
      if (!(failure instanceof ApiError && failure.code === "key_not_found")) {
        return false;
      }
      closeDialogs();
      closeEdit();
      await changed(failure.message);
      return true;
    }

    // -- the confirmation, before any change that refuses requests that work now

    // `run(report)` makes the change; it closes the dialog when done, or calls `report` with
    // what went wrong, and the dialog stays for another try or Cancel.
    function confirmFirst({ title, description, items, action, run }) {
      confirming = run;
      confirmTitle.textContent = title;
      confirmDescription.textContent = description;
      confirmList.replaceChildren(...items.map((text) => el("li", { text })));
      confirmList.hidden = items.length === 0;
      confirmOk.textContent = action;
      hide(confirmError);
      confirmOk.disabled = false;
      confirmDialog.showModal();
      confirmCancel.focus();
    }

    confirmCancel.addEventListener("click", () => confirmDialog.close("cancel"));

    whenClosed(confirmDialog, () => {
      confirming = null;
    });

    confirmOk.addEventListener("click", async () => {
      const run = confirming;
      if (!run) {
        return;
      }
      confirmOk.disabled = true;
      hide(confirmError);
      await run((text) => {
        show(confirmError, text);
        confirmOk.disabled = false;
      });
    });

    // -- create

    function hideSecret() {
      secretValue.value = "";
      secretName.textContent = "";
      copyStatus.textContent = "";
      hide(secretGrace);
      secretPanel.hidden = true;
    }

    // The secret of a new key, or of a rolled one (with how long the one it replaces works).
    function showSecret(created, rolled) {
      secretLead.textContent = rolled ? "New secret for" : "Your new key:";
      secretName.textContent = created.name;
      secretValue.value = created.secret_key;
      copyStatus.textContent = "";
      if (!rolled) {
        hide(secretGrace);
      } else if (created.previous_secret_expires_at) {
        show(
          secretGrace,
          `The old secret keeps working until ${whenText(created.previous_secret_expires_at)}; ` +
            "then only this one works.",
        );
      } else {
        show(secretGrace, "The old secret no longer works: only this one does.");
      }
      secretPanel.hidden = false;
      secretTitle.focus();
    }

    createForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      hide(createError);
      hide(pageStatus);
      const name = nameInput.value.trim();
      const permissions = Array.from(
        createForm.querySelectorAll('input[name="permissions"]:checked'),
        (box) => box.value,
      );
      if (!name) {
        show(createError, "Give the key a name.");
        nameInput.focus();
        return;
      }
      if (permissions.length === 0) {
        show(createError, "Choose at least one permission.");
        createForm.querySelector('input[name="permissions"]').focus();
        return;
      }
      createSubmit.disabled = true;
      try {
        const created = await call("POST", "/keys", {
          name,
          permissions,
          expires_days: Number(expiry.value),
        });
        createForm.reset();
        showSecret(created, false);
        await refresh();
      } catch (failure) {
        show(createError, failure instanceof ApiError ? describe(failure) : "Creating the key failed.");
        createError.scrollIntoView({ block: "nearest" });
      } finally {
        createSubmit.disabled = false;
      }
    });

    copyButton.addEventListener("click", async () => {
      const secret = secretValue.value;
      try {
        await navigator.clipboard.writeText(secret);
        copyStatus.textContent = "Copied to the clipboard.";
      } catch {
        // No clipboard access: select it so the user can copy it themselves.
        secretValue.focus();
        secretValue.select();
        copyStatus.textContent = "Copying was blocked: the secret is selected, copy it with Ctrl+C.";
      }
    });

    byId("dismiss-secret").addEventListener("click", () => {
      hideSecret();
      nameInput.focus();
    });

    // -- roll: a new secret, the current one working for the chosen grace

    function openRoll(key) {
      rolling = key;
      rollForm.reset(); // the default grace again
      rollName.textContent = key.name;
      rollPrefix.textContent = key.key_prefix;
      hide(rollError);
      hide(pageStatus);
      rollSubmit.disabled = false;
      rollDialog.showModal();
      rollForm.querySelector('input[name="roll-grace"]:checked').focus();
    }

    byId("roll-cancel").addEventListener("click", () => rollDialog.close("cancel"));

    whenClosed(rollDialog, () => {
      rolling = null;
    });

    async function rollKey(key, graceSeconds, report) {
      let rolled;
      try {
        rolled = await call("POST", `${keyPath(key)}/roll`, { grace_seconds: graceSeconds });
      } catch (failure) {
        if (!(await gone(failure))) {
          report(failed("Rolling the key", failure));
        }
        return;
      }
      closeDialogs();
      hideSecret();
      showSecret(rolled, true);
      await refresh();
    }

    rollForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const key = rolling;
      if (!key) {
        return;
      }
      const grace = Number(rollForm.querySelector('input[name="roll-grace"]:checked').value);
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
      if (cuts.length === 0) {
        rollSubmit.disabled = true;
        hide(rollError);
        rollKey(key, grace, (text) => {
          show(rollError, text);
          rollSubmit.disabled = false;
        });
        return;
      }
      rollDialog.close("confirm");
      confirmFirst({
        title: `Roll ${key.name} and cut off its old secret?`,
        description: "Anything still using the old secret stops working:",
        items: cuts,
        action: "Roll and cut off",
        run: (report) => rollKey(key, grace, report),
      });
    });

    // -- disable and enable

    async function setEnabled(key, enabled, report) {
      try {
        await call("PATCH", keyPath(key), { enabled });
      } catch (failure) {
        if (!(await gone(failure))) {
          report(failed(enabled ? "Enabling the key" : "Disabling the key", failure));
        }
        return;
      }
      closeDialogs();
      await changed(
        enabled
          ? `Enabled the key ${key.name}. It works again from its next request.`
          : `Disabled the key ${key.name}. It is refused from its next request until you enable it.`,
      );
    }

    function toggleKey(key, button) {
      hide(pageStatus);
      hide(listError);
      if (key.enabled === false) {
        button.disabled = true;
        setEnabled(key, true, (text) => {
          show(listError, text);
          button.disabled = false;
        });
        return;
      }
      confirmFirst({
        title: `Disable ${key.name}?`,
        description:
          `Anything using the key ${key.key_prefix} is refused from its next request, until ` +
          "you enable it again. It stays listed, and keeps its secret and settings.",
        items: [],
        action: "Disable key",
        run: (report) => setEnabled(key, false, report),
      });
    }

    // -- edit: name, permissions, expiry, allowed addresses, rate limit

    function syncRate() {
      ratePerSecond.disabled = !rateOwn.checked;
      rateBurst.disabled = !rateOwn.checked;
    }
    rateDefault.addEventListener("change", syncRate);
    rateOwn.addEventListener("change", syncRate);

    function clearProblems() {
      hide(editError);
      hide(editStatus);
      for (const { box, controls } of Object.values(fieldProblems)) {
        hide(box);
        for (const control of controls) {
          control.removeAttribute("aria-invalid");
        }
      }
    }

    // Each field's reason from a 400, next to the field; the first such field gets the focus.
    // What has no field here goes with the form's error.
    function showProblems(failure) {
      const details =
        failure.details && typeof failure.details === "object" && !Array.isArray(failure.details)
          ? failure.details
          : {};
      const elsewhere = [];
      let first = null;
      for (const [field, why] of Object.entries(details)) {
        const place = fieldProblems[field];
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
      show(editError, `Saving the changes failed: ${failure.message}${extra}`);
      (first || editError).scrollIntoView({ block: "nearest" });
      if (first) {
        first.focus();
      }
    }

    function openEdit(key) {
      editing = key;
      clearProblems();
      hide(pageStatus);
      editTitleName.textContent = key.name;
      editName.value = key.name;
      const held = new Set(key.permissions || []);
      for (const box of editBoxes) {
        box.checked = held.has(box.value);
      }
      editExpiry.value = "";
      editExpiryCurrent.textContent = key.expires_at
        ? `it expires ${whenText(key.expires_at)}`
        : "it never expires";
      editIps.value = (Array.isArray(key.allowed_ips) ? key.allowed_ips : []).join("\n");
      const rate = key.rate_limit || null;
      rateDefault.checked = !rate;
      rateOwn.checked = Boolean(rate);
      ratePerSecond.value = rate ? String(rate.per_second) : "";
      rateBurst.value = rate ? String(rate.burst) : "";
      syncRate();
      editSubmit.disabled = false;
      editPanel.hidden = false;
      editTitle.focus();
    }

    function closeEdit() {
      editing = null;
      clearProblems();
      editPanel.hidden = true;
    }

    byId("edit-cancel").addEventListener("click", () => {
      const key = editing;
      closeEdit();
      const buttons = key && rowButtons.get(key.id);
      (buttons ? buttons.edit : listTitle).focus();
    });

    // What the form changes (only the fields that differ from the key as listed), and what of
    // it refuses requests that work now, in words, for the confirmation.
    function editChanges(key) {
      const body = {};
      const cuts = [];
      const name = editName.value.trim();
      if (name !== key.name) {
        body.name = name;
      }

      const before = key.permissions || [];
      const chosen = editBoxes.filter((box) => box.checked).map((box) => box.value);
      if (chosen.length !== before.length || chosen.some((permission) => !before.includes(permission))) {
        body.permissions = chosen;
        const removed = before.filter((permission) => !chosen.includes(permission));
        if (removed.length && chosen.length) {
          cuts.push(
            `It loses ${removed.length === 1 ? "the permission" : "the permissions"} ` +
              `${removed.join(", ")}: requests that need ${removed.length === 1 ? "it" : "them"} are refused.`,
          );
        }
      }

      if (editExpiry.value.trim() !== "") {
        body.expires_days = wholeNumber(editExpiry.value);
        if (typeof body.expires_days === "number") {
          const days = body.expires_days;
          cuts.push(
            `It expires ${days} ${days === 1 ? "day" : "days"} from now ` +
              `(${key.expires_at ? `until now ${whenText(key.expires_at)}` : "it never expired"}); ` +
              "it is refused after that.",
          );
        }
      }

      const entries = addressList(editIps.value);
      const held = Array.isArray(key.allowed_ips) ? key.allowed_ips : [];
      const wanted = entries.map(asNetwork);
      if (wanted.length !== held.length || wanted.some((network, index) => network !== held[index])) {
        body.allowed_ips = entries;
        const dropped = held.filter((network) => !wanted.includes(network));
        if (entries.length && !held.length) {
          cuts.push(
            `It may be used only from ${entries.join(", ")}, no longer from anywhere: ` +
              "requests from any other address are refused.",
          );
        } else if (entries.length && dropped.length) {
          cuts.push(
            `It may no longer be used from ${dropped.join(", ")}: requests from there are refused.`,
          );
        }
      }

      const rate = rateOwn.checked
        ? { per_second: wholeNumber(ratePerSecond.value), burst: wholeNumber(rateBurst.value) }
        : null;
      const current = key.rate_limit || null;
      if (!sameRate(rate, current)) {
        body.rate_limit = rate;
        const numbers = !rate || (typeof rate.per_second === "number" && typeof rate.burst === "number");
        // The service's default rate is not known here: a change to or from it may lower it.
        const lower =
          !rate || !current || rate.per_second < current.per_second || rate.burst < current.burst;
        if (numbers && lower) {
          cuts.push(
            `Its rate limit becomes ${rateText(rate)} (until now ${rateText(current)}): ` +
              "requests over it are refused.",
          );
        }
      }
      return { body, cuts };
    }

    async function saveEdit(key, body, report) {
      let updated;
      try {
        updated = await call("PATCH", keyPath(key), body);
      } catch (failure) {
        if (await gone(failure)) {
          return;
        }
        if (failure instanceof ApiError && failure.code === "validation_failed") {
          closeDialogs();
          editSubmit.disabled = false;
          showProblems(failure);
          return;
        }
        report(failed("Saving the changes", failure));
        return;
      }
      closeDialogs();
      closeEdit();
      await changed(`Saved the changes to the key ${updated.name || key.name}.`);
    }

    editForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const key = editing;
      if (!key) {
        return;
      }
      clearProblems();
      hide(pageStatus);
      const { body, cuts } = editChanges(key);
      if (Object.keys(body).length === 0) {
        show(editStatus, "Nothing to save: the form is as the key is.");
        return;
      }
      if (body.permissions && body.permissions.length === 0) {
        show(editError, "Saving the changes failed: choose at least one permission.");
        show(fieldProblems.permissions.box, "Choose at least one permission.");
        editBoxes[0].focus();
        return;
      }
      if (cuts.length === 0) {
        editSubmit.disabled = true;
        saveEdit(key, body, (text) => {
          show(editError, text);
          editSubmit.disabled = false;
          editError.scrollIntoView({ block: "nearest" });
        });
        return;
      }
      confirmFirst({
        title: `Save the changes to ${key.name}?`,
        description: "From the key's next request:",
        items: cuts,
        action: "Save changes",
        run: (report) => saveEdit(key, body, report),
      });
    });

    // -- revoke

    function openRevoke(key) {
      revoking = key;
      revokeName.textContent = key.name;
      revokePrefix.textContent = key.key_prefix;
      hide(revokeError);
      revokeConfirm.disabled = false;
      dialog.showModal();
      revokeCancel.focus();
    }

    revokeCancel.addEventListener("click", () => dialog.close("cancel"));

    whenClosed(dialog, () => {
      revoking = null;
    });

    revokeConfirm.addEventListener("click", async () => {
      const key = revoking;
      if (!key) {
        return;
      }
      revokeConfirm.disabled = true;
      hide(revokeError);
      try {
        await call("DELETE", keyPath(key));
        dialog.close("revoked");
        announce(`Revoked the key ${key.name}. It no longer works.`);
      } catch (failure) {
        if (!(failure instanceof ApiError && failure.code === "key_not_found")) {
          show(revokeError, failure instanceof ApiError ? describe(failure) : "Revoking failed.");
          revokeConfirm.disabled = false;
          return;
        }
        dialog.close("gone");
        announce(failure.message);
      }
      if (editing && editing.id === key.id) {
        closeEdit();
      }
      await refresh();
      listTitle.focus();
    });

    // -- log out

    // Say "logged out" only when the server says the session has ended: after a refusal (429,
    // 503, a network failure) the session may still be valid, so the page stays, keeps the token
    // for another try, and says so. A 401 saying the session is already over goes to sign in.
    const logoutButton = byId("logout");
    logoutButton.addEventListener("click", async () => {
      logoutButton.disabled = true;
      hide(pageError);
      try {
        await call("POST", "/auth/logout");
      } catch (failure) {
        const why = failure instanceof ApiError ? describe(failure) : "Logging out failed.";
        const retry =
          failure instanceof ApiError && failure.retryAfter
            ? `Try again in ${failure.retryAfter} s.`
            : "Try again.";
        show(
          pageError,
          `Logging out failed: ${why} You are still signed in here, and the session may still be valid. ${retry}`,
        );
        logoutButton.disabled = false;
        return;
      }
      hideSecret();
      toLogin({ kind: "info", text: "You have logged out." });
    });

    refresh();
  }

  // -- the files page ------------------------------------------------------------------------

  const UNITS = ["bytes", "KiB", "MiB", "GiB", "TiB"];

  function size(bytes) {
    if (!Number.isFinite(bytes) || bytes < 1024) {
      return `${bytes} ${bytes === 1 ? "byte" : "bytes"}`;
    }
    let value = bytes;
    let unit = 0;
    while (value >= 1024 && unit < UNITS.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${UNITS[unit]}`;
  }

  function initFiles() {
    const session = loadSession();
    if (!session) {
      toLogin({ kind: "info", text: "Sign in to manage your files." });
      return;
    }
    const token = session.token;

    const pageStatus = byId("page-status");
    const pageError = byId("page-error");
    const picker = byId("file-picker");
    const dropZone = byId("drop-zone");
    const uploads = byId("uploads");
    const table = byId("files-table");
    const tbody = byId("files-body");
    const loading = byId("files-loading");
    const empty = byId("files-empty");
    const listError = byId("files-error");
    const listTitle = byId("files-title");
    const more = byId("files-more");
    const dialog = byId("delete-dialog");
    const deleteName = byId("delete-name");
    const deleteError = byId("delete-error");
    const deleteConfirm = byId("delete-confirm");
    const deleteCancel = byId("delete-cancel");
    let deleting = null; // the file the dialog is about
    let nextCursor = null;

    byId("account-email").textContent = session.email || "";

    function signedOut(failure) {
      toLogin({ kind: "error", text: `You have been signed out. ${failure.message}` });
    }

    async function call(method, path) {
      try {
        return await api(method, path, { token });
      } catch (failure) {
        if (sessionEnded(failure)) {
          signedOut(failure);
          return new Promise(() => {}); // never settles: the page is being replaced
        }
        throw failure;
      }
    }

    // -- list

    function fileRow(file) {
      const download = el("button", { text: "Download", className: "secondary", attrs: { type: "button" } }, [
        el("span", { text: ` ${file.name}`, className: "visually-hidden" }),
      ]);
      download.addEventListener("click", () => downloadFile(file, download));
      const remove = el("button", { text: "Delete", className: "danger", attrs: { type: "button" } }, [
        el("span", { text: ` ${file.name}`, className: "visually-hidden" }),
      ]);
      remove.addEventListener("click", () => openDelete(file));
      const cell = (label, className, content) =>
        el("td", { className, attrs: { "data-label": label } }, [content]);
      const row = el("tr", {}, [
        cell("Name", "key-name file-name", document.createTextNode(file.name)),
        cell("Size", "file-size", el("span", { text: size(file.size), attrs: { title: `${file.size} bytes` } })),
        cell("Type", "file-type", el("code", { text: file.content_type })),
        cell("Uploaded", "file-uploaded", when(file.created_at, "—")),
        el("td", { className: "key-actions", attrs: { "data-label": "Actions" } }, [download, remove]),
      ]);
      row.dataset.fileId = file.id;
      return row;
    }

    function showRows(rows, append) {
      if (append) {
        tbody.append(...rows);
      } else {
        tbody.replaceChildren(...rows);
      }
      const count = tbody.children.length;
      table.hidden = count === 0;
      empty.hidden = count !== 0;
      more.hidden = nextCursor === null;
    }

    async function refresh() {
      hide(listError);
      try {
        const data = await call("GET", "/files?limit=100");
        nextCursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
        showRows((Array.isArray(data.files) ? data.files : []).map(fileRow), false);
      } catch (failure) {
        show(listError, failure instanceof ApiError ? describe(failure) : "Loading files failed.");
      } finally {
        loading.hidden = true;
      }
    }

    more.addEventListener("click", async () => {
      if (nextCursor === null) {
        return;
      }
      more.disabled = true;
      hide(listError);
      try {
        const data = await call("GET", `/files?limit=100&cursor=${encodeURIComponent(nextCursor)}`);
        nextCursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
        showRows((Array.isArray(data.files) ? data.files : []).map(fileRow), true);
      } catch (failure) {
        show(listError, failure instanceof ApiError ? describe(failure) : "Loading files failed.");
      } finally {
        more.disabled = false;
      }
    });

    // -- upload: one XMLHttpRequest per file, for its upload progress (fetch has none)

    function uploadRefusal(file, failure) {
      const details = failure.details && typeof failure.details === "object" ? failure.details : {};
      if (failure.code === "payload_too_large") {
        const limit = Number.isFinite(details.max_bytes) ? ` of ${size(details.max_bytes)}` : "";
        return `Refused: ${file.name} is larger than the limit${limit} per file.`;
      }
      if (failure.code === "file_limit_reached") {
        const limit = Number.isFinite(details.max_files) ? ` of ${details.max_files} files` : "";
        return `Refused: your account holds the maximum${limit}. Delete some before uploading more.`;
      }
      if (failure.code === "insufficient_permission") {
        return `Refused: ${failure.message}`;
      }
      return `Upload failed: ${describe(failure)}`;
    }

    function upload(file) {
      const bar = el("progress", { attrs: { max: "100", value: "0", "aria-label": `Upload of ${file.name}` } });
      const status = el("p", { className: "upload-status", text: "Starting…", attrs: { role: "status" } });
      const item = el("li", { className: "is-active" }, [
        el("span", { className: "upload-name", text: file.name }),
        bar,
        status,
      ]);
      uploads.prepend(item);

      const finish = (kind, text) => {
        item.className = kind;
        status.textContent = text;
      };
      const form = new FormData();
      form.append("file", file, file.name);
      const request = new XMLHttpRequest();
      request.open("POST", `${API}/files`);
      for (const [name, value] of Object.entries(withToken({ Accept: "application/json" }, token))) {
        request.setRequestHeader(name, value);
      }
      request.upload.addEventListener("progress", (event) => {
        if (event.lengthComputable && event.total > 0) {
          const percent = Math.min(99, Math.floor((event.loaded / event.total) * 100));
          bar.value = percent;
          status.textContent = `Uploading… ${percent}%`;
        }
      });
      request.addEventListener("load", () => {
        let payload = null;
        try {
          payload = JSON.parse(request.responseText);
        } catch {
          payload = null;
        }
        if (request.status === 201 && payload && payload.success === true) {
          bar.value = 100;
          finish("is-done", `Uploaded ${file.name} (${size(payload.data.size)}).`);
          refresh();
          return;
        }
        const failure = refusal(request.status, payload, request.getResponseHeader("Retry-After"));
        if (sessionEnded(failure)) {
          signedOut(failure);
          return;
        }
        finish("is-error", uploadRefusal(file, failure));
      });
      request.addEventListener("error", () => {
        finish("is-error", `Upload failed: the service could not be reached, or closed the connection. Try again.`);
      });
      request.send(form);
    }

    function uploadAll(fileList) {
      hide(pageStatus);
      for (const file of Array.from(fileList || [])) {
        upload(file);
      }
    }

    picker.addEventListener("change", () => {
      uploadAll(picker.files);
      picker.value = "";
    });

    // A file dropped anywhere but the zone must not make the browser leave the page to show it.
    for (const type of ["dragover", "drop"]) {
      window.addEventListener(type, (event) => event.preventDefault());
    }
    for (const type of ["dragenter", "dragover"]) {
      dropZone.addEventListener(type, (event) => {
        event.preventDefault();
        dropZone.classList.add("is-over");
      });
    }
    dropZone.addEventListener("dragleave", () => dropZone.classList.remove("is-over"));
    dropZone.addEventListener("drop", (event) => {
      event.preventDefault();
      dropZone.classList.remove("is-over");
      uploadAll(event.dataTransfer ? event.dataTransfer.files : []);
    });

    // -- download: the token goes in a header, so the bytes come by fetch and leave as a Blob

    async function downloadFile(file, button) {
      button.disabled = true;
      hide(pageError);
      try {
        let response;
        try {
          response = await fetch(`${API}/files/${encodeURIComponent(file.id)}/content`, {
            headers: withToken({}, token),
            credentials: "omit",
            cache: "no-store",
          });
        } catch {
          throw new ApiError(0, "network_error", "The service could not be reached. Try again.");
        }
        if (!response.ok) {
          let payload = null;
          try {
            payload = await response.json();
          } catch {
            payload = null;
          }
          const failure = refusal(response.status, payload, response.headers.get("Retry-After"));
          if (sessionEnded(failure)) {
            signedOut(failure);
            return;
          }
          throw failure;
        }
        const blob = await response.blob();
        const url = URL.createObjectURL(blob);
        const link = el("a", { attrs: { href: url, download: file.name } });
        link.hidden = true;
        document.body.append(link);
        link.click();
        link.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
      } catch (failure) {
        show(pageError, `Downloading ${file.name} failed: ${failure instanceof ApiError ? describe(failure) : "try again."}`);
      } finally {
        button.disabled = false;
      }
    }

    // -- delete

    function openDelete(file) {
      deleting = file;
      deleteName.textContent = file.name;
      hide(deleteError);
      deleteConfirm.disabled = false;
      dialog.showModal();
      deleteCancel.focus();
    }

    deleteCancel.addEventListener("click", () => dialog.close("cancel"));

    whenClosed(dialog, () => {
      deleting = null;
    });

    deleteConfirm.addEventListener("click", async () => {
      const file = deleting;
      if (!file) {
        return;
      }
      deleteConfirm.disabled = true;
      hide(deleteError);
      try {
        await call("DELETE", `/files/${encodeURIComponent(file.id)}`);
        dialog.close("deleted");
        show(pageStatus, `Deleted ${file.name}.`);
      } catch (failure) {
        if (!(failure instanceof ApiError && failure.code === "file_not_found")) {
          show(deleteError, failure instanceof ApiError ? describe(failure) : "Deleting failed.");
          deleteConfirm.disabled = false;
          return;
        }
        dialog.close("gone");
        show(pageStatus, failure.message);
      }
      await refresh();
      listTitle.focus();
    });

    // -- log out: as on the keys page, "logged out" only when the server ended the session

    const logoutButton = byId("logout");
    logoutButton.addEventListener("click", async () => {
      logoutButton.disabled = true;
      hide(pageError);
      try {
        await call("POST", "/auth/logout");
      } catch (failure) {
        const why = failure instanceof ApiError ? describe(failure) : "Logging out failed.";
        show(pageError, `Logging out failed: ${why} You are still signed in here. Try again.`);
        logoutButton.disabled = false;
        return;
      }
      toLogin({ kind: "info", text: "You have logged out." });
    });

    refresh();
  }

  // -- the sessions page ---------------------------------------------------------------------

  // "Try again in 30 s." when the server said how long to wait; nothing more after a network
  // failure, whose message says to try again already.
  function retryHint(failure) {
    if (failure instanceof ApiError && failure.retryAfter) {
      return ` Try again in ${failure.retryAfter} s.`;
    }
    return failure instanceof ApiError && failure.status === 0 ? "" : " Try again.";
  }

  function initSessions() {
    const session = loadSession();
    if (!session) {
      toLogin({ kind: "info", text: "Sign in to manage your sessions." });
      return;
    }
    const token = session.token;

    const pageStatus = byId("page-status");
    const pageError = byId("page-error");
    const table = byId("sessions-table");
    const tbody = byId("sessions-body");
    const loading = byId("sessions-loading");
    const listError = byId("sessions-error");
    const listTitle = byId("sessions-title");
    const endOthers = byId("end-others");
    const dialog = byId("end-dialog");
    const endTitle = byId("end-title");
    const endDescription = byId("end-description");
    const endError = byId("end-error");
    const endConfirm = byId("end-confirm");
    const endCancel = byId("end-cancel");
    const passwordForm = byId("password-form");
    const currentPassword = byId("current-password");
    const newPassword = byId("new-password");
    const passwordSubmit = byId("password-submit");
    const passwordStatus = byId("password-status");
    const passwordError = byId("password-error");
    let ending = null; // what the dialog is about: {session} for one, {others: true} for all

    byId("account-email").textContent = session.email || "";
    byId("password-username").value = session.email || "";

    async function call(method, path, body) {
      try {
        return await api(method, path, { token, body });
      } catch (failure) {
        if (sessionEnded(failure)) {
          toLogin({ kind: "error", text: `You have been signed out. ${failure.message}` });
          return new Promise(() => {}); // never settles: the page is being replaced
        }
        throw failure;
      }
    }

    function failed(what, failure) {
      const why = failure instanceof ApiError ? describe(failure) : "No answer.";
      return `${what} failed: ${why}${retryHint(failure)}`;
    }

    // -- list

    function device(item) {
      // The User-Agent as the browser sent it, shown as text only.
      return typeof item.user_agent === "string" && item.user_agent
        ? item.user_agent
        : "Unknown device";
    }

    function sessionRow(item) {
      const cell = (label, className, content) =>
        el("td", { className, attrs: { "data-label": label } }, [content]);
      const deviceBox = el("div", { className: "device" }, [
        el("span", { className: "user-agent", text: device(item) }),
      ]);
      let action;
      if (item.current) {
        deviceBox.prepend(el("strong", { className: "this-device", text: "This device" }));
        action = el("span", { className: "hint", text: "Log out to end it" });
      } else {
        action = el("button", { text: "End", className: "danger", attrs: { type: "button" } }, [
          el("span", { text: ` session on ${device(item)}`, className: "visually-hidden" }),
        ]);
        action.dataset.sessionId = item.id;
        action.addEventListener("click", () => openEnd({ session: item }));
      }
      const row = el("tr", {}, [
        cell("Device", "key-name session-device", deviceBox),
        cell("Address", "session-ip", el("code", { text: item.ip || "unknown" })),
        cell("Signed in", "session-created", when(item.created_at, "—")),
        cell("Last seen", "session-last-seen", when(item.last_seen_at, "—")),
        cell("Expires", "session-expires", when(item.expires_at, "—")),
        cell("Actions", "key-actions", action),
      ]);
      row.dataset.sessionId = item.id;
      if (item.current) {
        row.className = "is-current";
      }
      return row;
    }

    async function refresh() {
      hide(listError);
      try {
        const data = await call("GET", "/auth/sessions");
        const sessions = Array.isArray(data.sessions) ? data.sessions : [];
        tbody.replaceChildren(...sessions.map(sessionRow));
        table.hidden = sessions.length === 0;
        endOthers.hidden = !sessions.some((item) => !item.current);
      } catch (failure) {
        show(listError, failed("Loading your sessions", failure));
      } finally {
        loading.hidden = true;
      }
    }

    // -- end one, or every other: behind the same confirmation

    function openEnd(what) {
      ending = what;
      if (what.session) {
        endTitle.textContent = "End this session?";
        endDescription.textContent =
          `The session on ${device(what.session)} (address ${what.session.ip || "unknown"}) is ` +
          "signed out from its next request.";
        endConfirm.textContent = "End session";
      } else {
        endTitle.textContent = "End all other sessions?";
        endDescription.textContent =
          "Every session but this one is signed out from its next request. You stay signed in here.";
        endConfirm.textContent = "End other sessions";
      }
      hide(endError);
      endConfirm.disabled = false;
      dialog.showModal();
      endCancel.focus();
    }

    endCancel.addEventListener("click", () => dialog.close("cancel"));
    endOthers.addEventListener("click", () => openEnd({ others: true }));

    whenClosed(dialog, () => {
      ending = null;
    });

    endConfirm.addEventListener("click", async () => {
      const what = ending;
      if (!what) {
        return;
      }
      endConfirm.disabled = true;
      hide(endError);
      hide(pageStatus);
      try {
        if (what.session) {
          await call("DELETE", `/auth/sessions/${encodeURIComponent(what.session.id)}`);
          dialog.close("ended");
          show(pageStatus, `Ended the session on ${device(what.session)}.`);
        } else {
          const data = await call("DELETE", "/auth/sessions");
          const count = Number.isInteger(data.ended) ? data.ended : 0;
          dialog.close("ended");
          show(pageStatus, `Ended ${count} other ${count === 1 ? "session" : "sessions"}.`);
        }
      } catch (failure) {
        if (!(what.session && failure instanceof ApiError && failure.code === "session_not_found")) {
          show(endError, failed(what.session ? "Ending the session" : "Ending the other sessions", failure));
          endConfirm.disabled = false;
          return;
        }
        dialog.close("gone");
        show(pageStatus, failure.message);
      }
      await refresh();
      listTitle.focus();
    });

    // -- change the password: the two values leave the fields only for the request's body

    passwordForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      hide(passwordStatus);
      hide(passwordError);
      if (!currentPassword.value || !newPassword.value) {
        show(passwordError, "Enter your current password and a new one.");
        (currentPassword.value ? newPassword : currentPassword).focus();
        return;
      }
      const body = { current_password: currentPassword.value, new_password: newPassword.value };
      currentPassword.value = "";
      newPassword.value = "";
      passwordSubmit.disabled = true;
      try {
        const data = await call("POST", "/auth/password", body);
        const count = Number.isInteger(data.sessions_ended) ? data.sessions_ended : 0;
        show(passwordStatus, `Your password was changed. Other sessions were ended: ${count}.`);
        await refresh();
      } catch (failure) {
        show(passwordError, failed("Changing the password", failure));
        currentPassword.focus();
      } finally {
        passwordSubmit.disabled = false;
      }
    });

    // -- log out: "logged out" only when the server ended the session, as on the keys page

    const logoutButton = byId("logout");
    logoutButton.addEventListener("click", async () => {
      logoutButton.disabled = true;
      hide(pageError);
      try {
        await call("POST", "/auth/logout");
      } catch (failure) {
        show(
          pageError,
          `${failed("Logging out", failure)} You are still signed in here, and the session may still be valid.`,
        );
        logoutButton.disabled = false;
        return;
      }
      toLogin({ kind: "info", text: "You have logged out." });
    });

    refresh();
  }

  // -- the activity page ---------------------------------------------------------------------

  const ACTIVITY_PAGE_SIZE = 50;
  const MAX_PAGE_SIZE = 1000; // the API's own bound on `limit`

  // `/activity?limit=N` asks for pages of N events (1 to 1000, as the API allows); anything else
  // is the default.
  function activityPageSize() {
    const raw = new URLSearchParams(window.location.search).get("limit") || "";
    const value = /^\d{1,4}$/.test(raw) ? Number(raw) : 0;
    return value >= 1 && value <= MAX_PAGE_SIZE ? value : ACTIVITY_PAGE_SIZE;
  }

  function twoDigits(number) {
    return String(number).padStart(2, "0");
  }

  // "2025-01-31T12:34:56Z" -> "2025-01-31 18:04:56 UTC+05:30": the browser's own time zone,
  // named by its offset, with the exact instant (UTC) in `datetime` and the tooltip.
  function localTime(iso) {
    const date = typeof iso === "string" ? new Date(iso) : new Date(Number.NaN);
    if (Number.isNaN(date.getTime())) {
      return document.createTextNode(typeof iso === "string" && iso ? iso : "—");
    }
    const offset = -date.getTimezoneOffset();
    const zone =
      offset === 0
        ? "UTC"
        : `UTC${offset < 0 ? "-" : "+"}${twoDigits(Math.floor(Math.abs(offset) / 60))}:${twoDigits(Math.abs(offset) % 60)}`;
    const text =
      `${date.getFullYear()}-${twoDigits(date.getMonth() + 1)}-${twoDigits(date.getDate())} ` +
      `${twoDigits(date.getHours())}:${twoDigits(date.getMinutes())}:${twoDigits(date.getSeconds())} ${zone}`;
    return el("time", { text, attrs: { datetime: iso, title: iso } });
  }

  // A "Session ses_…" or "Key key_…" kind of reference: a word and the id as code.
  function reference(word, id) {
    return [`${word} `, el("code", { className: "id", text: String(id) })];
  }

  function actorNodes(actor) {
    if (!actor || typeof actor !== "object") {
      return ["Not signed in"]; // a failed login: nobody was authenticated
    }
    if (actor.type === "session" && actor.session_id) {
      return reference("Session", actor.session_id);
    }
    if (actor.type === "cli") {
      return ["An operator (command line)"];
    }
    if (actor.type === "leak_report") {
      return [`A leak report from ${actor.ip || "an unknown address"}`];
    }
    return [typeof actor.type === "string" ? actor.type : "Unknown"];
  }

  function targetNodes(target) {
    if (!target || typeof target !== "object") {
      return ["—"];
    }
    if (target.key_id) {
      return reference("Key", target.key_id);
    }
    if (target.session_id) {
      return reference("Session", target.session_id);
    }
    const entries = Object.entries(target);
    return entries.length ? [entries.map(([name, value]) => `${name} ${changeText(value)}`).join(", ")] : ["—"];
  }

  // One changed field's new value, as text whatever its shape.
  function changeText(value) {
    if (value === null || value === undefined) {
      return "none";
    }
    if (Array.isArray(value)) {
      return value.length ? value.map((item) => (typeof item === "string" ? item : JSON.stringify(item))).join(", ") : "none";
    }
    return typeof value === "object" ? JSON.stringify(value) : String(value);
  }

  // What changed, field by field, whatever the fields are: a list of names and new values (a
  // time, a field named *_at, in local time like the event's own).
  function changesNode(changes) {
    if (!changes || typeof changes !== "object" || Array.isArray(changes)) {
      return document.createTextNode("—");
    }
    const entries = Object.entries(changes);
    if (!entries.length) {
      return document.createTextNode("—");
    }
    return el(
      "dl",
      { className: "changes" },
      entries.flatMap(([name, value]) => [
        el("dt", { text: name }),
        el("dd", {}, [
          name.endsWith("_at") && typeof value === "string" ? localTime(value) : changeText(value),
        ]),
      ]),
    );
  }

  function initActivity() {
    const session = loadSession();
    if (!session) {
      toLogin({ kind: "info", text: "Sign in to see your account's activity." });
      return;
    }
    const token = session.token;
    const limit = activityPageSize();

    const pageError = byId("page-error");
    const filter = byId("activity-type");
    const table = byId("activity-table");
    const tbody = byId("activity-body");
    const loading = byId("activity-loading");
    const empty = byId("activity-empty");
    const listError = byId("activity-error");
    const more = byId("activity-more");
    // The event types' names are the filter's: one list, in the page.
    const labels = new Map(
      Array.from(filter.options)
        .filter((option) => option.value)
        .map((option) => [option.value, option.textContent.trim()]),
    );
    let nextCursor = null;
    let generation = 0; // a filter change makes the answers to earlier requests stale

    byId("account-email").textContent = session.email || "";
    const asked = new URLSearchParams(window.location.search).get("type");
    if (asked && labels.has(asked)) {
      filter.value = asked;
    }

    async function call(method, path) {
      try {
        return await api(method, path, { token });
      } catch (failure) {
        if (sessionEnded(failure)) {
          toLogin({ kind: "error", text: `You have been signed out. ${failure.message}` });
          return new Promise(() => {}); // never settles: the page is being replaced
        }
        throw failure;
      }
    }

    function failed(what, failure) {
      const why = failure instanceof ApiError ? describe(failure) : "No answer.";
      return `${what} failed: ${why}${retryHint(failure)}`;
    }

    function eventRow(item) {
      // One element per cell: on a narrow screen a cell is a grid of its label and its value.
      const cell = (label, className, content) =>
        el("td", { className, attrs: { "data-label": label } }, [el("div", {}, content)]);
      const agent =
        typeof item.user_agent === "string" && item.user_agent ? item.user_agent : "Unknown device";
      const row = el("tr", { attrs: { tabindex: "-1" } }, [
        cell("When", "event-when", [localTime(item.at)]),
        cell("Event", "event-type", [
          el("span", { className: "event-label", text: labels.get(item.type) || String(item.type) }),
          el("code", { text: String(item.type) }),
        ]),
        cell("By", "event-actor", actorNodes(item.actor)),
        cell("Address", "event-ip", [el("code", { text: item.ip || "unknown" })]),
        // The User-Agent as the client sent it, shown as text only.
        cell("Device", "event-agent", [el("span", { className: "user-agent", text: agent })]),
        cell("Target", "event-target", targetNodes(item.target)),
        cell("Changes", "event-changes", [changesNode(item.changes)]),
      ]);
      row.dataset.eventId = item.id;
      row.dataset.eventType = item.type;
      return row;
    }

    // The first page of the chosen type (from scratch), or the next page after the last one.
    async function load(fromStart) {
      const ticket = ++generation;
      const query = new URLSearchParams({ limit: String(limit) });
      if (filter.value) {
        query.set("type", filter.value);
      }
      if (fromStart) {
        nextCursor = null;
        tbody.replaceChildren();
        table.hidden = true;
        hide(empty);
        more.hidden = true;
        loading.hidden = false;
      } else if (nextCursor !== null) {
        query.set("cursor", nextCursor);
      }
      hide(listError);
      more.disabled = true;
      try {
        const data = await call("GET", `/audit-events?${query}`);
        if (ticket !== generation) {
          return;
        }
        const rows = (Array.isArray(data.events) ? data.events : []).map(eventRow);
        nextCursor = typeof data.next_cursor === "string" ? data.next_cursor : null;
        tbody.append(...rows);
        const count = tbody.children.length;
        table.hidden = count === 0;
        if (count === 0) {
          const label = labels.get(filter.value);
          show(empty, label ? `No “${label}” activity yet.` : "No activity yet.");
        }
        more.hidden = nextCursor === null;
        if (!fromStart && rows.length) {
          rows[0].focus(); // the first of the new rows, so a keyboard user reads on from there
        }
      } catch (failure) {
        if (ticket === generation) {
          show(listError, failed("Loading the activity", failure));
          more.hidden = nextCursor === null; // "Load more" tries the same page again
        }
      } finally {
        if (ticket === generation) {
          loading.hidden = true;
          more.disabled = false;
        }
      }
    }

    filter.addEventListener("change", () => {
      // The address keeps the filter, so a reload or a shared link shows the same list.
      const url = new URL(window.location.href);
      if (filter.value) {
        url.searchParams.set("type", filter.value);
      } else {
        url.searchParams.delete("type");
      }
      window.history.replaceState(null, "", url);
      load(true);
    });
    more.addEventListener("click", () => load(false));

    // -- log out: "logged out" only when the server ended the session, as on the keys page

    const logoutButton = byId("logout");
    logoutButton.addEventListener("click", async () => {
      logoutButton.disabled = true;
      hide(pageError);
      try {
        await call("POST", "/auth/logout");
      } catch (failure) {
        show(
          pageError,
          `${failed("Logging out", failure)} You are still signed in here, and the session may still be valid.`,
        );
        logoutButton.disabled = false;
        return;
      }
      toLogin({ kind: "info", text: "You have logged out." });
    });

    load(true);
  }

  const page = document.body.dataset.page;
  if (page === "login") {
    initLogin();
  } else if (page === "keys") {
    initKeys();
  } else if (page === "files") {
    initFiles();
  } else if (page === "sessions") {
    initSessions();
  } else if (page === "activity") {
    initActivity();
  }
})();
