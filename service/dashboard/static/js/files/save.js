// Handing bytes fetched with the token to the browser's own download: a Blob under a name,
// through a link made for the purpose. The browser holds the bytes in memory until saved.

import { size } from "../bytes.js";
import { el, show } from "../dom.js";

export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = el("a", { attrs: { href: url, download: name } });
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// How far a download has come, said in `status` from a quarter of a second on (a quick one says
// nothing on the way), as often as that at most. `done(text)` says `text` once the download
// has said anything, else puts back what `status` said before (null: that either way).
export function downloadProgress(status, name) {
  const before = { text: status.textContent, hidden: status.hidden };
  let last = performance.now();
  let spoke = false;
  return {
    progress(loaded, total) {
      const now = performance.now();
      if (now - last < 250) {
        return;
      }
      last = now;
      spoke = true;
      show(status, total
        ? `Downloading ${name}: ${Math.floor((loaded * 100) / total)}% (${size(loaded)} of ${size(total)})…`
        : `Downloading ${name}: ${size(loaded)}…`);
    },
    done(text) {
      if (spoke && text) {
        show(status, text);
        return;
      }
      status.textContent = before.text;
      status.hidden = before.hidden;
    },
  };
}
