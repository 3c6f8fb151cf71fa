// What the service accepts for a key's fields, checked in the forms before anything is sent or
// asked, so that nobody confirms a change the server then refuses. The same rules and bounds as
// service/api/validation.py and service/domain/key_rules.py (Python's ipaddress, as the service
// uses it); a test compares the bounds and runs both over the same inputs.

export const MAX_NAME_LENGTH = 100;
export const MAX_EXPIRES_DAYS = 3650;
export const MAX_ALLOWED_IPS = 100;
export const MAX_NETWORK_TEXT = 64;
export const MAX_PER_SECOND = 10000;
export const MAX_BURST = 10000;

// What Python's str.strip() takes off (its whitespace, which is not quite JavaScript's).
const PY_SPACE = "\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const PY_STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, "g");
const CONTROL = /[\x00-\x1f\x7f-\x9f]/; // Unicode's Cc, which a name may not hold

export function pyStrip(text) {
  return text.replace(PY_STRIP, "");
}

// Characters as Python counts them (code points, not UTF-16 units).
export function length(text) {
  return [...text].length;
}

// Why a key's name is refused ("must not be empty"), or null.
export function nameProblem(text) {
  const name = pyStrip(text);
  if (!name) {
    return "must not be empty";
  }
  if (length(name) > MAX_NAME_LENGTH) {
    return `must be at most ${MAX_NAME_LENGTH} characters`;
  }
  if (CONTROL.test(name)) {
    return "must not contain control characters";
  }
  return null;
}

// A whole number from `low` to `high` as typed ("20"), or null.
export function wholeNumber(text, low, high) {
  const trimmed = text.trim();
  if (!/^\d{1,9}$/.test(trimmed)) {
    return null;
  }
  const value = Number(trimmed);
  return value >= low && value <= high ? value : null;
}

// An IPv4 address as Python reads one: four decimal octets, no leading zeros. Its value as a
// number, or null.
function ipv4(text) {
  const octets = text.split(".");
  if (octets.length !== 4) {
    return null;
  }
  let value = 0;
  for (const octet of octets) {
    if (!/^\d{1,3}$/.test(octet) || (octet.length > 1 && octet[0] === "0") || Number(octet) > 255) {
      return null;
    }
    value = value * 256 + Number(octet);
  }
  return value;
}

// A prefix length as Python reads one: ASCII digits, leading zeros allowed, up to `most`.
function prefixLength(text, most) {
  return /^\d+$/.test(text) && Number(text) <= most;
}

// An IPv4 netmask (255.255.0.0) or hostmask (0.0.255.255) in dotted form, as Python allows
// after the slash of an IPv4 network.
function ipv4Mask(text) {
  const value = ipv4(text);
  if (value === null) {
    return false;
  }
  const bits = value.toString(2).padStart(32, "0");
  return /^1*0*$/.test(bits) || /^0*1*$/.test(bits);
}

// An IPv6 address as Python reads one (no zone id): hextets of 1 to 4 hex digits, at most one
// "::", and an IPv4 address in place of the last two.
function ipv6(text) {
  const parts = text.split(":");
  if (parts.length < 3) {
    return false;
  }
  if (parts[parts.length - 1].includes(".")) {
    if (ipv4(parts.pop()) === null) {
      return false;
    }
    parts.push("0", "0");
  }
  if (parts.length > 9) {
    return false;
  }
  const inner = parts.slice(1, -1);
  const gaps = inner.filter((part) => part === "").length;
  if (gaps > 1) {
    return false;
  }
  if (gaps === 1) {
    const gap = inner.indexOf("") + 1;
    let high = gap;
    let low = parts.length - gap - 1;
    if (parts[0] === "") {
      high -= 1;
      if (high) {
        return false; // a leading ":" only as part of "::"
      }
    }
    if (parts[parts.length - 1] === "") {
      low -= 1;
      if (low) {
        return false; // a trailing ":" only as part of "::"
      }
    }
    if (8 - (high + low) < 1) {
      return false;
    }
  } else if (parts.length !== 8 || parts[0] === "" || parts[parts.length - 1] === "") {
    return false;
  }
  // What is left empty is the "::" alone: every other part is a hextet.
  return parts.filter((part) => part !== "").every((part) => /^[0-9A-Fa-f]{1,4}$/.test(part));
}

// Whether the service takes `text` as an allowed address or network: an IPv4 or IPv6 address,
// or one with a /prefix (host bits may be set; an IPv4 one may give a dotted mask instead).
export function isNetwork(text) {
  if (!text || length(text) > MAX_NETWORK_TEXT || text.includes("%") || text !== pyStrip(text)) {
    return false;
  }
  const pieces = text.split("/");
  if (pieces.length > 2) {
    return false;
  }
  const [address, prefix] = pieces;
  if (ipv4(address) !== null) {
    return prefix === undefined || prefixLength(prefix, 32) || ipv4Mask(prefix);
  }
  return ipv6(address) && (prefix === undefined || prefixLength(prefix, 128));
}

// The allow-list as typed, one entry per line or separated by commas (or spaces): its entries
// in order, and what is wrong with it, each problem naming its line from 1.
export function allowList(text) {
  const entries = [];
  const problems = [];
  text.split("\n").forEach((line, index) => {
    for (const entry of line.split(/[\s,]+/).filter((item) => item !== "")) {
      entries.push(entry);
      if (!isNetwork(entry)) {
        problems.push(`Line ${index + 1}: “${entry}” is not an IPv4 or IPv6 address or CIDR network.`);
      }
    }
  });
  if (entries.length > MAX_ALLOWED_IPS) {
    problems.unshift(`At most ${MAX_ALLOWED_IPS} addresses or networks: this list has ${entries.length}.`);
  }
  return { entries, problems };
}
