// The ten permissions an API key can hold, in the service's order, with what each allows: the
// one list the pages render them from. It must stay equal to service/auth/permissions.py
// (PERMISSIONS and PERMISSION_DESCRIPTIONS); a test compares them.

import { el } from "./dom.js";

export const PERMISSIONS = Object.freeze([
  { name: "files.read", description: "List, read and download files" },
  { name: "files.write", description: "Upload, rename, move and delete files" },
  { name: "folders.read", description: "List and read folders" },
  { name: "folders.write", description: "Create, rename, move and delete folders" },
  { name: "aliases.read", description: "List vanity aliases and read their views" },
  { name: "aliases.write", description: "Create, change, disable and delete aliases" },
  { name: "keys.read", description: "List API keys" },
  { name: "keys.write", description: "Create and revoke API keys" },
  { name: "settings.read", description: "Read the account's settings" },
  { name: "settings.write", description: "Change the account's settings" },
]);

// How the forms group them: one box per resource (the part of the name before the dot).
const RESOURCES = {
  files: { legend: "Files" },
  folders: { legend: "Folders" },
  aliases: { legend: "Aliases" },
  keys: {
    legend: "API keys",
    note: "The key endpoints accept only a signed-in session, so these grant an API key nothing today.",
  },
  settings: { legend: "Settings" },
};
const ACTIONS = { read: "Read", write: "Write" };

function checkbox(permission, idPrefix, name) {
  const [resource, action] = permission.name.split(".");
  const id = `${idPrefix}${resource}-${action}`;
  return el("label", { className: "check", attrs: { for: id } }, [
    el("input", { attrs: { type: "checkbox", id, name, value: permission.name } }),
    el("span", {}, [`${ACTIONS[action] || action} `, el("small", { text: permission.description })]),
  ]);
}

// The checkboxes of every permission, grouped by resource, unchecked. A checkbox's id is
// `idPrefix` and the permission's name with a dash ("perm-files-read"), so that two grids can
// share a page; each is named `name` and has the permission's name as its value.
export function permissionGrid(idPrefix, name) {
  const groups = new Map();
  for (const permission of PERMISSIONS) {
    const resource = permission.name.split(".")[0];
    if (!groups.has(resource)) {
      const about = RESOURCES[resource] || { legend: resource };
      const group = el("fieldset", { className: "perm-group" }, [el("legend", { text: about.legend })]);
      groups.set(resource, { group, about });
    }
    groups.get(resource).group.append(checkbox(permission, idPrefix, name));
  }
  for (const [resource, { group, about }] of groups) {
    if (about.note) {
      const noteId = `${idPrefix}${resource}-note`;
      group.append(el("p", { className: "perm-note", text: about.note, attrs: { id: noteId } }));
      group.setAttribute("aria-describedby", noteId);
    }
  }
  return el(
    "div",
    { className: "perm-grid" },
    Array.from(groups.values(), ({ group }) => group),
  );
}
