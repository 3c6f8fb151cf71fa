"""Uploader configurations (``POST /api/v1/uploaders``): the text of a ShareX custom uploader
(``.sxcu``) or of a POSIX shell script that uploads with a key made for it and hands back the
link, and the name of the file a person saves it as.

Pure functions over plain values. Each holds the key's secret, which the service shows in that
one answer only: nothing here logs or keeps it.
"""

from __future__ import annotations

import json
import re
import unicodedata

SHAREX = "sharex"
CURL = "curl"
KINDS = (SHAREX, CURL)
_EXTENSIONS = {SHAREX: "sxcu", CURL: "sh"}

# What an uploader's key may do: upload, and with an alias also make one of each upload.
UPLOAD_PERMISSIONS = ("files.write",)
ALIAS_PERMISSIONS = ("files.write", "aliases.write")

# The ShareX version whose custom uploader syntax (``{json:…}``) the file is written in.
SHAREX_VERSION = "14.1.0"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_RUNS = re.compile(r"[-.]{2,}")
_FILENAME_STEM_LENGTH = 64


def permissions(alias: bool) -> list[str]:
    return list(ALIAS_PERMISSIONS if alias else UPLOAD_PERMISSIONS)


def filename(kind: str, name: str) -> str:
    """``filehost-<name>.sxcu`` or ``.sh``: the name folded to ASCII letters, digits, ``.``,
    ``_`` and ``-`` (anything else a ``-``), so any system saves it as given."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    stem = _RUNS.sub("-", _UNSAFE.sub("-", folded)).strip("-._")
    stem = stem[:_FILENAME_STEM_LENGTH].rstrip("-._")
    return f"filehost-{stem or 'uploader'}.{_EXTENSIONS[kind]}"


def sharex(name: str, base_url: str, secret: str, alias: bool) -> str:
    """A ShareX custom uploader: a multipart ``POST`` of the file to ``base_url``'s
    ``/api/v1/files`` with the key in ``X-API-Key``, copying the alias's ``url`` or, without an
    alias, the file's (both absolute); a refusal's message shown as ShareX's error."""
    config: dict[str, object] = {
        "Version": SHAREX_VERSION,
        "Name": name,
        "DestinationType": "ImageUploader, TextUploader, FileUploader",
        "RequestMethod": "POST",
        "RequestURL": f"{base_url}/api/v1/files",
        "Headers": {"X-API-Key": secret},
        "Body": "MultipartFormData",
    }
    if alias:
        config["Arguments"] = {"alias": "true"}
    config["FileFormName"] = "file"
    config["URL"] = "{json:data.alias.url}" if alias else "{json:data.url}"
    config["ErrorMessage"] = "{json:error.message}"
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def _quoted(value: str) -> str:
    """``value`` as one single-quoted shell word."""
    return "'" + value.replace("'", "'\\''") + "'"


_SCRIPT = """#!/bin/sh
# filehost uploader {title}: uploads each file given and prints its link, one a line.
# Usage: sh {script} FILE...
# It holds an API key that may only upload{what}: keep this file
# private, and revoke the key on the keys page should it leak.
# Needs curl; the link (or a refusal's message) is read from the service's JSON answer with
# sed (POSIX).
set -eu

UPLOAD_URL={upload_url}
API_KEY={secret}

if [ "$#" -eq 0 ]; then
  echo "usage: $0 FILE..." >&2
  exit 2
fi
for file in "$@"; do
  # curl's -F reads ; and , in a file name as options unless the name is quoted.
  quoted=$(printf '%s' "$file" | sed 's/[\\\\"]/\\\\&/g')
  answer=$(curl -sS -w '\\n%{{http_code}}' -H "X-API-Key: $API_KEY" \\
    -F "file=@\\"$quoted\\""{alias_field} "$UPLOAD_URL")
  status=$(printf '%s\\n' "$answer" | sed -n '$p')
  answer=$(printf '%s\\n' "$answer" | sed '$d')
  case "$status" in
    2??) ;;
    *)
      message=$(printf '%s\\n' "$answer" | sed -n \\
        's/.*"message"[[:space:]]*:[[:space:]]*"\\([^"\\\\]*\\(\\\\.[^"\\\\]*\\)*\\)".*/\\1/p')
      echo "$file: refused, HTTP $status: ${{message:-$answer}}" >&2
      exit 1
      ;;
  esac
  {extract}
  if [ -z "$link" ]; then
    echo "no link in the answer: $answer" >&2
    exit 1
  fi
  printf '%s\\n' "$link"
done
"""

_ALIAS_LINK = (
    "link=$(printf '%s\\n' \"$answer\" | sed -n "
    '\'s/.*"alias"[[:space:]]*:[[:space:]]*{[^}]*"url"[[:space:]]*:[[:space:]]*"\\([^"]*\\)".*/\\1/p\')'
)
_FILE_LINK = (
    "link=$(printf '%s\\n' \"$answer\" | sed -n "
    '\'s/.*"url"[[:space:]]*:[[:space:]]*"\\([^"]*\\)".*/\\1/p\')'
)


def curl_script(name: str, base_url: str, secret: str, alias: bool) -> str:
    """A POSIX ``sh`` script doing what the ShareX uploader does with ``curl``: each file
    argument uploaded in turn (stopping at the first refusal, whose status and message it
    prints), its link printed: the alias's ``url``, or the file's."""
    title = json.dumps(name, ensure_ascii=True)
    return _SCRIPT.format(
        title=title,
        script=filename(CURL, name),
        what=" and alias each upload" if alias else "",
        upload_url=_quoted(f"{base_url}/api/v1/files"),
        secret=_quoted(secret),
        alias_field=" -F alias=true" if alias else "",
        extract=_ALIAS_LINK if alias else _FILE_LINK,
    )
