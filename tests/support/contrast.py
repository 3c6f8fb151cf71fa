"""Whether every text a page shows keeps a WCAG AA contrast with what is behind it, measured in the
browser as shown: the dashboard's pages and the public pages of a link alike."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page

# Luminance and contrast as WCAG 2 defines them; the colour of text over what is behind it
# (its own background, else its ancestors', blended where one is translucent).
CONTRASTS = """() => {
    const rgba = (text) => {
        const parts = text.match(/[\\d.]+/g).map(Number);
        return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
    };
    const over = (top, bottom) => top.slice(0, 3).map(
        (channel, index) => channel * top[3] + bottom[index] * (1 - top[3])).concat([1]);
    const background = (element) => {
        const layers = [];
        for (let node = element; node; node = node.parentElement) {
            const colour = rgba(getComputedStyle(node).backgroundColor);
            if (colour[3] > 0) layers.push(colour);
            if (colour[3] === 1) break;
            if (node.tagName === 'DIALOG') break;
        }
        let result = [255, 255, 255, 1];
        if (layers.length && layers[layers.length - 1][3] === 1) result = layers.pop();
        while (layers.length) result = over(layers.pop(), result);
        return result;
    };
    const luminance = ([r, g, b]) => {
        const linear = (value) => {
            const c = value / 255;
            return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
        };
        return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
    };
    const found = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
        const element = text.parentElement;
        if (!text.textContent.trim() || !element.checkVisibility()) continue;
        if (element.closest(':disabled, .visually-hidden, .skip-link')) continue;
        const style = getComputedStyle(element);
        const back = background(element);
        const fore = over(rgba(style.color), back);
        const [light, dark] = [luminance(fore), luminance(back)].sort((a, b) => b - a);
        const size = parseFloat(style.fontSize);
        const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
        found.push({
            text: text.textContent.trim().slice(0, 40),
            ratio: Math.round(((light + 0.05) / (dark + 0.05)) * 100) / 100,
            needed: large ? 3 : 4.5,
        });
    }
    return found;
}"""


async def low_contrasts(page: Page, texts: int = 6) -> list[dict[str, Any]]:
    """Every text shown whose contrast is below AA's; the page shows at least ``texts``."""
    await page.mouse.move(0, 0)  # measured as shown, not as under the pointer
    found = await page.evaluate(CONTRASTS)
    assert len(found) >= texts  # the walk does find the page's text
    return [item for item in found if item["ratio"] < item["needed"]]
