"""A raster image's thumbnail, made with Pillow (never a decoder of our own): PNG, JPEG, GIF (its
first frame) and WebP only, whatever else Pillow could read; a WebP of at most
``THUMBNAIL_SIZE`` pixels a side, turned as the image's EXIF orientation says.

What one image may cost is bounded before anything is decoded: the bytes read
(``MAX_SOURCE_BYTES``, checked by the caller), the pixels its header declares
(``MAX_SOURCE_PIXELS``, which is also Pillow's ``Image.MAX_IMAGE_PIXELS``, and Pillow's
``DecompressionBombWarning`` is an error), the pixels actually decoded (``MAX_DECODED_PIXELS``:
a baseline JPEG is decoded at a reduced scale, ``Image.draft``, libjpeg's 1/2 to 1/8; every other
image whole), and the memory the decode takes by its format's measured cost per pixel
(``MAX_DECODE_BYTES``, ``BYTES_PER_PIXEL``). So a decompression bomb (a small file whose header
declares a huge image) is refused from its header, in microseconds, and an honest image costs
at most ``MAX_DECODE_BYTES`` of memory and the time to decode that many pixels.

Synchronous and CPU-bound: ``service.auth.thumbnails`` runs it in a thread, a few at a time and
within a worker's budget of memory (``decoding_cost`` says what each takes, from its header).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from typing import TypeVar

from PIL import Image, ImageOps

THUMBNAIL_SIZE = 320
# The most bytes of a file read to make its thumbnail: a larger file has none.
MAX_SOURCE_BYTES = 32 * 1024 * 1024
# The most pixels an image's header may declare (a 48-megapixel phone photo fits).
MAX_SOURCE_PIXELS = 50_000_000
# The most pixels decoded for one thumbnail (about 80 MB as RGBA): a JPEG's at its reduced scale.
MAX_DECODED_PIXELS = 20_000_000
# The most memory one decode may take, by BYTES_PER_PIXEL's estimate (a 12-megapixel WebP's).
MAX_DECODE_BYTES = 200 * 1024 * 1024
# What decoding takes, in bytes of memory per pixel decoded, as measured with Pillow 13 (peak
# resident memory over a 4000×3000 image's): libwebp's decoder holds several RGBA canvases; a PNG
# or GIF its pixels in their mode (RGBA at most) and a little more; a progressive JPEG keeps every
# coefficient of the whole image (``PROGRESSIVE_JPEG``), a baseline one only its reduced scale.
BYTES_PER_PIXEL = {"WEBP": 17, "PNG": 5, "GIF": 5, "JPEG": 1}
PROGRESSIVE_JPEG = 4
# The formats decoded, by Pillow's name: no other decoder of Pillow's is ever tried.
FORMATS = ("PNG", "JPEG", "GIF", "WEBP")
WEBP_QUALITY = 80

# Pillow warns of an image past MAX_IMAGE_PIXELS as it opens it (and refuses one past twice
# that): the warning is an error, so no such image is decoded anywhere in the process.
Image.MAX_IMAGE_PIXELS = MAX_SOURCE_PIXELS
warnings.simplefilter("error", Image.DecompressionBombWarning)


_Made = TypeVar("_Made")


class NoThumbnail(Exception):
    """The bytes are not an image of ``FORMATS`` that may be decoded within the bounds (not an
    image, corrupt or cut short, a decompression bomb, too large)."""


def decoding_cost(data: bytes | bytearray) -> int:
    """What making the thumbnail of ``data`` would take in memory, from its header alone (no
    pixel decoded); ``NoThumbnail`` for what has none that the header tells (not an image of
    ``FORMATS``, a decompression bomb, too many pixels, too much memory)."""
    return _opened(data, _checked)


def make_thumbnail(data: bytes | bytearray) -> bytes:
    """The WebP thumbnail of the image ``data``; ``NoThumbnail`` when it has none."""
    return _opened(data, _thumbnail)


def _opened(data: bytes | bytearray, use: Callable[[Image.Image], _Made]) -> _Made:
    try:
        with Image.open(io.BytesIO(data), formats=FORMATS) as image:
            return use(image)
    except (NoThumbnail, MemoryError):  # short of memory now is no verdict on the image
        raise
    except Exception as error:
        # Whatever a decoder raises on bytes anyone may upload (OSError, SyntaxError, a
        # struct.error, the decompression bomb's error and warning, ...) means the same: none.
        raise NoThumbnail(type(error).__name__) from None


def _checked(image: Image.Image) -> int:
    """The image's decoding cost, once its header is within every bound; drafted (a JPEG set to
    decode at a reduced scale)."""
    width, height = image.size
    declared = width * height
    if width < 1 or height < 1 or declared > MAX_SOURCE_PIXELS:
        raise NoThumbnail("too many pixels")
    # JPEG only (a no-op elsewhere): decode at the smallest scale still at least twice the
    # thumbnail's size, as Image.thumbnail's reducing_gap would, so the checks below see it.
    image.draft(None, (THUMBNAIL_SIZE * 2, THUMBNAIL_SIZE * 2))
    width, height = image.size
    if width * height > MAX_DECODED_PIXELS:
        raise NoThumbnail("too many pixels to decode")
    cost = _decode_bytes(image, declared)
    if cost > MAX_DECODE_BYTES:
        raise NoThumbnail("too much memory to decode")
    return cost


def _thumbnail(image: Image.Image) -> bytes:
    _checked(image)
    image.thumbnail((THUMBNAIL_SIZE, THUMBNAIL_SIZE), reducing_gap=2.0)
    # Turned after scaling (the box is square, so it still fits): the orientation costs a
    # thumbnail's pixels, not the image's.
    turned = ImageOps.exif_transpose(image)
    if turned.mode not in ("RGB", "RGBA"):
        turned = turned.convert("RGBA" if _has_alpha(turned) else "RGB")
    out = io.BytesIO()
    turned.save(out, "WEBP", quality=WEBP_QUALITY)
    return out.getvalue()


def _decode_bytes(image: Image.Image, declared: int) -> int:
    """What decoding ``image`` (drafted already; ``declared`` pixels before) would take in memory,
    by its format's cost: a progressive JPEG's is every coefficient of the declared image."""
    if image.format == "JPEG" and image.info.get("progressive"):
        return declared * PROGRESSIVE_JPEG
    width, height = image.size
    return width * height * BYTES_PER_PIXEL.get(image.format or "", max(BYTES_PER_PIXEL.values()))


def _has_alpha(image: Image.Image) -> bool:
    return "A" in image.getbands() or "transparency" in image.info
