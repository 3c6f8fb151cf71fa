"""The documents that point at tests keep pointing at tests that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?")


def test_every_test_docs_security_names_exists() -> None:
    text = (ROOT / "docs" / "security.md").read_text()
    references = set(REFERENCE.findall(text))
    assert len(references) > 20  # the threat model names its proofs
    missing = [
        f"{path}::{name}" if name else path
        for path, name in sorted(references)
        if not (ROOT / path).exists() or (name and f"def {name}(" not in (ROOT / path).read_text())
    ]
    assert missing == []
