// What the dashboard may show of a file, by its stored type: a raster image, a video, a sound, a
// PDF or plain text, and nothing else. SVG, HTML, XML and every unknown type stay downloads: a
// picture that is a document (SVG) or a page could run script on the service's origin.

// Media are fetched whole before they are shown (the token goes in a header, so the browser
// cannot stream them from a URL): past this size a preview only offers the download.
export const MAX_PREVIEW_BYTES = 50 * 1024 * 1024;
// Text is fetched with a Range request for its first bytes only, shown as text.
export const TEXT_PREVIEW_BYTES = 256 * 1024;

const IMAGES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp"]);
const VIDEOS = new Set(["video/mp4", "video/webm", "video/ogg"]);
const SOUNDS = new Set(["audio/mpeg", "audio/ogg", "audio/wav", "audio/x-wav", "audio/webm", "audio/flac", "audio/mp4"]);
const TEXTS = new Set(["text/plain", "text/csv", "text/markdown", "application/json"]);

// The type without its parameters, in lower case: "text/plain; charset=utf-8" -> "text/plain".
function bare(contentType) {
  return String(contentType || "").split(";", 1)[0].trim().toLowerCase();
}

// "image", "video", "audio", "pdf", "text", or null when the file is only downloaded.
export function previewKind(contentType) {
  const type = bare(contentType);
  if (IMAGES.has(type)) {
    return "image";
  }
  if (VIDEOS.has(type)) {
    return "video";
  }
  if (SOUNDS.has(type)) {
    return "audio";
  }
  if (type === "application/pdf") {
    return "pdf";
  }
  return TEXTS.has(type) ? "text" : null;
}

// Whether a type the dashboard does not show is one a browser would run script in (a page, an
// SVG picture, XML, a script): the reason it is only downloaded, where any other such type
// simply has no preview.
export function couldRunCode(contentType) {
  return /html|svg|xml|javascript|ecmascript/.test(bare(contentType));
}

// The type a preview's Blob is given: the one the kind is shown as, whatever the bytes say.
export function blobType(contentType) {
  return previewKind(contentType) === "text" ? "text/plain" : bare(contentType);
}

// What a tile shows for a file without a thumbnail: its extension ("PDF"), else its kind.
export function extensionLabel(name, contentType) {
  const match = /\.([0-9A-Za-z]{1,5})$/.exec(name || "");
  if (match) {
    return match[1].toUpperCase();
  }
  const kind = previewKind(contentType);
  return kind ? kind.toUpperCase() : "FILE";
}
