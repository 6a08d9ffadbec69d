"""The README stays a front door and the documents stay linked: the README is at most 15,000
characters, every relative link in it and in ``docs/`` reaches a file that exists (and, into a
Markdown file, a heading that exists), and every bench has its table of dated figures.

Plain file reads: no database, no other program.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_CHARACTERS = 15_000
DOCUMENTS = [README, *sorted((ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target), the target up to a space (an optional "title") or ")".
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
EXTERNAL = ("http://", "https://", "mailto:")


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def relative_links(path: Path) -> list[str]:
    return [target for target in LINK.findall(prose(path.read_text())) if not target.startswith(EXTERNAL)]


def heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file: lower case, punctuation dropped,
    spaces as hyphens, a repeated heading numbered (``-1``, ``-2``)."""
    anchors: set[str] = set()
    seen: Counter[str] = Counter()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return anchors


def test_it_keeps_the_readme_within_its_size() -> None:
    characters = len(README.read_text())
    assert characters <= README_MAX_CHARACTERS, (
        f"README.md is {characters:,} characters (at most {README_MAX_CHARACTERS:,}): "
        "move reference and measurements to docs/ and link them"
    )


def test_it_shows_the_two_commands_in_the_readme() -> None:
    text = README.read_text()
    assert "make demo" in text and "make test" in text


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_it_links_only_to_files_that_exist(document: Path) -> None:
    broken = []
    for target in relative_links(document):
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            broken.append(
                f"{target} (no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked})"
            )
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
            broken.append(f"{target} (no heading #{anchor} in {linked.relative_to(ROOT)})")
    assert broken == [], f"{document.relative_to(ROOT)} links to what does not exist: {broken}"


def test_it_finds_the_links_it_checks() -> None:
    # The check above would pass on a README whose links it failed to parse.
    links = relative_links(README)
    assert "docs/overview.png" in links and "docs/benchmarks.md" in links
    assert relative_links(ROOT / "docs" / "benchmarks.md")


def test_it_tables_the_figures_of_every_bench() -> None:
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text()
    scripts = {path.name for path in (ROOT / "bench").glob("*.py")}
    # Helpers of other benches, not benches: the shared module, the old detector kept as a
    # reference, the realistic series' generator and the run-by-run replay of the detector.
    helpers = {"common.py", "detection_old.py", "detection_realistic.py", "detection_replay.py"}
    missing = sorted(name for name in scripts - helpers if f"bench/{name}" not in benchmarks)
    assert missing == [], f"docs/benchmarks.md does not mention {missing}"
