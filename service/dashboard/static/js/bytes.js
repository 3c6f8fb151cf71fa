// Sizes, speeds, durations and counts as the pages say them.

// 10000 -> "10,000": the pages' words are English, so are their numbers.
export const number = new Intl.NumberFormat("en").format;

const UNITS = ["bytes", "KiB", "MiB", "GiB", "TiB"];

// 1536 -> "1.5 KiB": a file's size for people.
export function size(bytes) {
  if (!Number.isFinite(bytes) || bytes < 1024) {
    return `${bytes} ${bytes === 1 ? "byte" : "bytes"}`;
  }
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${UNITS[unit]}`;
}

// 1048576 bytes a second -> "1.0 MiB/s".
export function speed(bytesPerSecond) {
  return `${size(Math.round(bytesPerSecond))}/s`;
}

// 75 -> "1 min 15 s", 8 -> "8 s": how long is left, to the second.
export function duration(seconds) {
  const whole = Math.max(1, Math.ceil(seconds));
  if (whole < 60) {
    return `${whole} s`;
  }
  const minutes = Math.floor(whole / 60);
  if (minutes < 60) {
    return whole % 60 ? `${minutes} min ${whole % 60} s` : `${minutes} min`;
  }
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}
