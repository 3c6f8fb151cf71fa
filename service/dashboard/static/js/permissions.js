// The ten permissions an API key can hold, in the service's order, with what each lets a key do
// exactly as the service enforces it today, and who enforces it ("service": this service's own
// endpoints; "gateway": only a gateway asking /auth/verify for a service of its own, nothing
// here being hosted for it yet; "nothing": the key endpoints take a session only). The one list
// the pages draw them from. It must stay equal to service/domain/permissions.py (PERMISSIONS,
// PERMISSION_DESCRIPTIONS, ENFORCED_BY); a test compares them.

import { el } from "./dom.js";

export const PERMISSIONS = Object.freeze([
  {
    name: "files.read",
    description: "List files (all of them, or one folder's), read their details and download them",
    enforcedBy: "service",
  },
  {
    name: "files.write",
    description: "Upload files (into a folder), rename, move and delete them",
    enforcedBy: "service",
  },
  {
    name: "folders.read",
    description: "List a folder's folders and read a folder with its path",
    enforcedBy: "service",
  },
  {
    name: "folders.write",
    description: "Create, rename, move and delete folders (deleting one with everything in it also needs files.write)",
    enforcedBy: "service",
  },
  {
    name: "aliases.read",
    description: "List vanity aliases and read one with its views",
    enforcedBy: "service",
  },
  {
    name: "aliases.write",
    description:
      "Create, change, disable and delete vanity aliases of what the key may read, and ask for one with an upload",
    enforcedBy: "service",
  },
  {
    name: "keys.read",
    description: "Nothing: only a signed-in session may list keys",
    enforcedBy: "nothing",
  },
  {
    name: "keys.write",
    description: "Nothing: only a signed-in session may create, change or revoke keys",
    enforcedBy: "nothing",
  },
  { name: "settings.read", description: "Read the account's settings", enforcedBy: "service" },
  { name: "settings.write", description: "Change the account's settings", enforcedBy: "service" },
]);

// How the forms group them: one box per resource (the part of the name before the dot).
const RESOURCES = {
  files: { legend: "Files" },
  folders: { legend: "Folders" },
  aliases: { legend: "Aliases" },
  keys: {
    legend: "API keys",
    note: "These grant an API key nothing: the key endpoints accept only a signed-in session.",
  },
  settings: { legend: "Settings" },
};
const ACTIONS = { read: "Read", write: "Write" };

// Shown first: what the service does for a key today. The others wait behind a disclosure that
// says why, so nobody grants them thinking they do something here.
const LATER_SUMMARY = "Also grant permissions for features not yet available";
const LATER_ABOUT =
  "The API key permissions grant nothing here: the key endpoints accept only a signed-in " +
  "session. A gateway in front of another service can still require them of a key " +
  "(forward-auth).";

function checkbox(permission, idPrefix, name) {
  const [resource, action] = permission.name.split(".");
  const id = `${idPrefix}${resource}-${action}`;
  return el("label", { className: "check", attrs: { for: id } }, [
    el("input", { attrs: { type: "checkbox", id, name, value: permission.name } }),
    el("span", {}, [`${ACTIONS[action] || action} `, el("small", { text: permission.description })]),
  ]);
}

// One box per resource of `permissions`, in their order, a resource's note after its boxes.
function groups(permissions, idPrefix, name) {
  const byResource = new Map();
  for (const permission of permissions) {
    const resource = permission.name.split(".")[0];
    if (!byResource.has(resource)) {
      const about = RESOURCES[resource] || { legend: resource };
      byResource.set(resource, {
        about,
        group: el("fieldset", { className: "perm-group" }, [el("legend", { text: about.legend })]),
      });
    }
    byResource.get(resource).group.append(checkbox(permission, idPrefix, name));
  }
  return Array.from(byResource, ([resource, { about, group }]) => {
    if (about.note) {
      const noteId = `${idPrefix}${resource}-note`;
      group.append(el("p", { className: "perm-note", text: about.note, attrs: { id: noteId } }));
      group.setAttribute("aria-describedby", noteId);
    }
    return group;
  });
}

// The checkboxes of every permission, unchecked: those the service enforces itself, then the
// rest behind "Also grant permissions for features not yet available". A checkbox's id is
// `idPrefix` and the permission's name with a dash ("perm-files-read"), so that two grids can
// share a page; each is named `name` and has the permission's name as its value.
export function permissionGrid(idPrefix, name) {
  const now = PERMISSIONS.filter((permission) => permission.enforcedBy === "service");
  const later = PERMISSIONS.filter((permission) => permission.enforcedBy !== "service");
  const aboutId = `${idPrefix}later-about`;
  return el("div", { className: "perm-choice" }, [
    el("div", { className: "perm-grid" }, groups(now, idPrefix, name)),
    el("details", { className: "perm-later", attrs: { id: `${idPrefix}later` } }, [
      el("summary", { text: LATER_SUMMARY, attrs: { "aria-describedby": aboutId } }),
      el("p", { text: LATER_ABOUT, attrs: { id: aboutId } }),
      el("div", { className: "perm-grid" }, groups(later, idPrefix, name)),
    ]),
  ]);
}

// Opens the disclosure of `grid` when one of its boxes is checked (a key that holds such a
// permission), and closes it otherwise: nothing a key holds is ever out of sight.
export function revealChecked(grid) {
  const later = grid.querySelector("details.perm-later");
  later.open = Boolean(later.querySelector("input:checked"));
}
