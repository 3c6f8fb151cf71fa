"""Images for the thumbnails' tests, made with Pillow: a real image of each raster type, one with
an EXIF orientation, and a decompression bomb (a small PNG whose header declares a huge image);
and a sound, made with the standard library."""

from __future__ import annotations

import io
import struct
import wave
import zlib

from PIL import Image

# EXIF's Orientation tag, and its value for "turn 90° clockwise to show".
ORIENTATION = 0x0112
TURNED_RIGHT = 6


def image_bytes(image_format: str, size: tuple[int, int] = (800, 600), **options: object) -> bytes:
    """An image of ``size`` in ``image_format`` (Pillow's name: PNG, JPEG, GIF, WEBP, ...), with
    a gradient so that it is not all one colour."""
    image = Image.linear_gradient("L").resize(size).convert("RGB")
    out = io.BytesIO()
    image.save(out, image_format, **options)
    return out.getvalue()


def solid_webp(size: tuple[int, int]) -> bytes:
    """A WebP of one colour, made as fast as libwebp can (for a large one)."""
    out = io.BytesIO()
    Image.new("RGB", size, (9, 9, 9)).save(out, "WEBP", quality=1, method=0)
    return out.getvalue()


def turned_jpeg(size: tuple[int, int] = (800, 400)) -> bytes:
    """A JPEG stored ``size`` wide, whose EXIF says to show it turned a quarter (so it shows
    ``size`` reversed)."""
    image = Image.new("RGB", size, (200, 30, 30))
    exif = image.getexif()
    exif[ORIENTATION] = TURNED_RIGHT
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif.tobytes())
    return out.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bomb(width: int = 50_000, height: int = 50_000) -> bytes:
    """A PNG of a few hundred bytes whose header declares ``width`` × ``height`` one-bit pixels
    (its compressed rows would inflate to hundreds of MB)."""
    row = b"\0" * (1 + (width + 7) // 8)
    rows = zlib.compressobj(9)
    data = b"".join(rows.compress(row) for _ in range(64)) + rows.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", data)
        + _chunk(b"IEND", b"")
    )


def opened(data: bytes) -> Image.Image:
    """The image ``data`` holds, read (so its format and size are known)."""
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def wav(seconds: float) -> bytes:
    """A WAV of ``seconds`` of silence (8 kHz, 8 bits, one channel: 8,000 bytes a second)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(1)
        sound.setframerate(8000)
        sound.writeframes(b"\x80" * int(8000 * seconds))
    return out.getvalue()
