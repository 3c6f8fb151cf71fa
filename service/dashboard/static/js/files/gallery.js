// The gallery: a tile per file, with its thumbnail (its thumbnail_url, fetched with the token and
// shown through a blob: address) or its extension, its name as the link that previews it, and
// its checkbox. Thumbnails are fetched only as their tiles come near the screen (an
// IntersectionObserver), a few at a time, so a page of 100 files does not ask for 100 at once.

import { API, fetchBlob } from "../api.js";
import { size } from "../bytes.js";
import { byId, el } from "../dom.js";
import { extensionLabel } from "./kinds.js";

// How many thumbnails are fetched at once, and how far below the screen a tile starts its own.
const AT_ONCE = 4;
const AHEAD = "200px";

// A thumbnail's path under the API, from the file's thumbnail_url ("/api/v1/files/…/thumbnail"),
// or null for one that is not the service's own (the token goes to this origin only).
export function thumbnailPath(address) {
  if (typeof address !== "string" || !address) {
    return null;
  }
  const url = new URL(address, window.location.origin);
  if (url.origin !== window.location.origin || !url.pathname.startsWith(`${API}/`)) {
    return null;
  }
  return url.pathname.slice(API.length) + url.search;
}

// `link(file)`: the file's link that opens its preview; `checkbox(file)`: its selection box.
export function gallery(token, { link, checkbox }) {
  const list = byId("files-gallery");
  let stopper = new AbortController();
  let urls = [];
  let waiting = [];
  let running = 0;

  function fetchNext() {
    while (running < AT_ONCE && waiting.length) {
      const [image, path] = waiting.shift();
      const signal = stopper.signal;
      running += 1;
      fetchBlob(path, token, { signal })
        .then((blob) => {
          if (signal.aborted) {
            return;
          }
          const url = URL.createObjectURL(blob);
          urls.push(url);
          image.addEventListener("load", () => {
            image.hidden = false;
            image.nextElementSibling.hidden = true; // the extension gives way to the picture
          }, { once: true });
          image.src = url;
        })
        .catch(() => {}) // no thumbnail (404, not decodable): the extension stays
        .finally(() => {
          running -= 1;
          fetchNext();
        });
    }
  }

  const observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting) {
        // The tile's picture box is watched: the picture itself is hidden until it has one.
        observer.unobserve(entry.target);
        waiting.push([entry.target.querySelector("img"), entry.target.dataset.thumbnail]);
      }
    }
    fetchNext();
  }, { rootMargin: AHEAD });

  function tile(file) {
    const image = el("img", { className: "tile-image", attrs: { alt: "" } });
    image.hidden = true;
    const label = el("span", { className: "tile-ext", text: extensionLabel(file.name, file.content_type) });
    const thumb = el("span", { className: "tile-thumb", attrs: { "aria-hidden": "true" } }, [image, label]);
    const path = thumbnailPath(file.thumbnail_url);
    if (path) {
      thumb.dataset.thumbnail = path;
      observer.observe(thumb);
    }
    const opener = link(file);
    opener.className = "tile-link";
    opener.replaceChildren(thumb, el("span", { className: "tile-name", text: file.name }));
    const item = el("li", { className: "tile" }, [
      checkbox(file),
      opener,
      el("span", { className: "tile-size", text: size(file.size) }),
    ]);
    item.dataset.fileId = file.id;
    return item;
  }

  return {
    // The tiles of `files` in place of the gallery's (empty: none), every fetch of the old
    // ones stopped and their pictures given back.
    replace(files) {
      stopper.abort();
      stopper = new AbortController();
      observer.disconnect();
      waiting = [];
      for (const url of urls) {
        URL.revokeObjectURL(url);
      }
      urls = [];
      list.replaceChildren(...files.map(tile));
    },
    append(files) {
      list.append(...files.map(tile));
    },
  };
}
