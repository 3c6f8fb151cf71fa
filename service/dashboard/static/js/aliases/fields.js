// The fields an alias is made and changed with, checked by the service's rules before anything
// is sent (the address, the view limit, the password), and a form's problems shown by their
// fields: the one code the create and the edit dialogs both use.

import { ApiError, describe, problemText } from "../api.js";
import { hide, show } from "../dom.js";
import { length } from "../keys/rules.js";

const SLUG = /^[A-Za-z0-9_-]{3,64}$/;
const LARGEST = 2 ** 53;

export const SLUG_PROBLEM = "3 to 64 letters, digits, - or _.";

export function durationText(seconds) {
  for (const [size, unit] of [
    [86400, "day"],
    [3600, "hour"],
    [60, "minute"],
  ]) {
    if (seconds % size === 0) {
      const count = seconds / size;
      return `${count} ${unit}${count === 1 ? "" : "s"}`;
    }
  }
  return `${seconds} seconds`;
}

// The address as typed (trimmed): {value} or {problem}; "" is {value: ""}.
export function readSlug(text) {
  const typed = text.trim();
  return !typed || SLUG.test(typed) ? { value: typed } : { problem: SLUG_PROBLEM };
}

// A view limit as typed: {value} (null when empty) or {problem}.
export function readViews(text) {
  const typed = text.trim();
  if (!typed) {
    return { value: null };
  }
  const most = /^\d{1,16}$/.test(typed) ? Number(typed) : NaN;
  return most >= 1 && most <= LARGEST ? { value: most } : { problem: "A whole number of at least 1, or empty." };
}

// A password as typed: its problem, or null when it may be sent.
export function passwordProblem(text) {
  const size = length(text);
  return size < 4 || size > 1024 ? "From 4 to 1024 characters, or empty for none." : null;
}

// `problems`: {field: {box, control}}; `error`: the form's own line. `mark(found, lead)` shows
// each problem by its field (the first one focused) and `lead` on the form's line; `clear()`
// hides them all.
export function fieldProblems(problems, error) {
  function clear() {
    hide(error);
    for (const { box, control } of Object.values(problems)) {
      hide(box);
      control.removeAttribute("aria-invalid");
    }
  }

  function mark(found, lead) {
    let first = null;
    const elsewhere = [];
    for (const [field, text] of Object.entries(found)) {
      const place = problems[field];
      if (!place) {
        elsewhere.push(`${field} ${text}`);
        continue;
      }
      show(place.box, text);
      place.control.setAttribute("aria-invalid", "true");
      first = first || place.control;
    }
    show(error, elsewhere.length ? `${lead} ${elsewhere.join("; ")}.` : lead);
    (first || error).scrollIntoView({ block: "nearest" });
    if (first) {
      first.focus();
    }
  }

  // The service's refusal of the form (`what`: "created", "changed"): a taken address, a
  // validation problem by its field, else the refusal's own words.
  function refused(failure, what, failedLine) {
    if (!(failure instanceof ApiError)) {
      show(error, failedLine);
    } else if (failure.code === "alias_taken") {
      mark({ slug: failure.message }, `Nothing was ${what}: that address is taken.`);
    } else if (failure.code === "validation_failed" && failure.details && typeof failure.details === "object") {
      const reasons = {};
      for (const [field, why] of Object.entries(failure.details)) {
        const text = problemText(why);
        reasons[field] = text ? `${text.charAt(0).toUpperCase()}${text.slice(1)}.` : failure.message;
      }
      mark(reasons, `Nothing was ${what}: ${failure.message}`);
    } else {
      show(error, `${failedLine.replace(/\.$/, "")}: ${describe(failure)}`);
    }
  }

  return { clear, mark, refused };
}
