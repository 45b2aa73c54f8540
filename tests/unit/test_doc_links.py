"""Every relative link in README.md and docs/*.md names a file of the repository and, with
an ``#anchor``, a heading of that file (GitHub's anchor of the heading's text)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces
    to hyphens."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    found: set[str] = set()
    for line in text.splitlines():
        match = re.match(r"#{1,6}\s+(.*)", line)
        if match:
            base = anchor(match.group(1))
            n = 0
            while (name := base if n == 0 else f"{base}-{n}") in found:
                n += 1
            found.add(name)
    return found


def links(path: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", path.read_text()))


def test_anchor_of_a_heading() -> None:
    assert anchor("Code hooks (Python only)") == "code-hooks-python-only"
    assert anchor("Choosing `--processes` and `--cpu-affinity`") == (
        "choosing---processes-and---cpu-affinity"
    )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in links(doc):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto: ...
            continue
        file_part, _, fragment = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT)}")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading #{fragment} in {dest.name}")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", DOCS[1:], ids=lambda p: p.name)
def test_a_mention_of_the_readme_is_a_link_to_its_section(doc: Path) -> None:
    # A reference by name ("see the README, <section>") is not checked and goes stale: link.
    text = LINK.sub("", FENCE.sub("", doc.read_text()))
    unlinked = [p for p in text.split("\n\n") if "README" in p]
    assert not unlinked, f"{doc.name}: name the README section by a link: {unlinked}"
