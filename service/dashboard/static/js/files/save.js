// Handing bytes fetched with the token to the browser's own download: a Blob under a name,
// through a link made for the purpose. The browser holds the bytes in memory until saved.

import { el } from "../dom.js";

export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = el("a", { attrs: { href: url, download: name } });
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}
