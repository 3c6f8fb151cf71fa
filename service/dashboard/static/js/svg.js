// The TOTP QR code, which the API sends as SVG markup, as elements of this page. The page's
// policy refuses every HTML-string sink (DOMParser included: Trusted Types, no policy), so the
// markup is read here, by a strict reader that knows only what a QR code is drawn with, and
// built with createElementNS. Anything else (a script, an event handler, a link, a url(...),
// an entity it does not know) makes it refuse the whole picture.

const SVG_NS = "http://www.w3.org/2000/svg";
const ELEMENTS = new Set(["svg", "g", "path", "rect", "title", "desc"]);
const ATTRIBUTES = new Set([
  "width",
  "height",
  "viewBox",
  "class",
  "transform",
  "stroke",
  "stroke-width",
  "fill",
  "d",
  "x",
  "y",
  "shape-rendering",
]);
// Numbers, path commands, colours, transforms: never a colon, quote, bracket or ampersand.
const VALUE = /^[\w\s#.,()%+-]*$/;
const TAG = /<(\/?)([a-zA-Z]+)((?:\s+[a-zA-Z:-]+="[^"<>]*")*)\s*(\/?)>/y;
const ATTRIBUTE = /([a-zA-Z:-]+)="([^"<>]*)"/g;
const TEXT = /[^<]+/y;
const ENTITIES = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#39;": "'" };

class Refused extends Error {}

function unescape(text) {
  return text.replace(/&[#\w]*;?/g, (entity) => {
    if (!(entity in ENTITIES)) {
      throw new Refused(`unknown entity ${entity}`);
    }
    return ENTITIES[entity];
  });
}

function element(name, attributes) {
  if (!ELEMENTS.has(name)) {
    throw new Refused(`element <${name}>`);
  }
  const node = document.createElementNS(SVG_NS, name);
  for (const [, attribute, value] of attributes.matchAll(ATTRIBUTE)) {
    if (attribute === "xmlns" && name === "svg" && value === SVG_NS) {
      continue;
    }
    if (!ATTRIBUTES.has(attribute) || !VALUE.test(value)) {
      throw new Refused(`attribute ${attribute} on <${name}>`);
    }
    node.setAttribute(attribute, value);
  }
  return node;
}

// The <svg> element the markup describes; throws when it holds anything else.
export function svgFromMarkup(markup) {
  const text = String(markup).trim();
  const stack = [];
  let root = null;
  let position = 0;
  while (position < text.length) {
    TAG.lastIndex = position;
    const tag = TAG.exec(text);
    if (tag) {
      position = TAG.lastIndex;
      const [, closing, name, attributes, selfClosing] = tag;
      if (closing) {
        const open = stack.pop();
        if (!open || open.localName !== name) {
          throw new Refused(`unbalanced </${name}>`);
        }
        continue;
      }
      const node = element(name, attributes);
      if (stack.length) {
        stack[stack.length - 1].append(node);
      } else if (root || name !== "svg") {
        throw new Refused("not one <svg> document");
      } else {
        root = node;
      }
      if (!selfClosing) {
        stack.push(node);
      }
      continue;
    }
    TEXT.lastIndex = position;
    const words = TEXT.exec(text);
    if (!words) {
      throw new Refused("markup it does not read");
    }
    position = TEXT.lastIndex;
    const parent = stack[stack.length - 1];
    if (parent && (parent.localName === "title" || parent.localName === "desc")) {
      parent.append(unescape(words[0]));
    } else if (words[0].trim()) {
      throw new Refused("text outside a title");
    }
  }
  if (!root || stack.length) {
    throw new Refused("an unfinished document");
  }
  return root;
}
