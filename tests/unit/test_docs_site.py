"""The manual holds together without building it: every page of docs/ is in mkdocs.yml's nav, every relative link
in README.md and docs/ reaches a file, the README stays a front door, and the site fetches nothing.

`mkdocs build --strict` (`make docs`, CI) checks the same and more; these checks run with the unit tests, so a page
added without a nav entry or a link broken by a moved file fails before CI builds the site. Links in README.md
must also work on GitHub, where there is no mkdocs: hence relative paths to files, checked here as files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_BYTES = 10_500  # "at most about 10 KB": the rest belongs in docs/

FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def nav_pages(nav) -> list[str]:
    """Every page path of an mkdocs nav (entries are 'page.md', {title: 'page.md'} or {title: [entries]})."""
    pages: list[str] = []
    for entry in nav:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            if isinstance(value, list):
                pages += nav_pages(value)
            elif not re.match(r"^[a-z]+://", value):
                pages.append(value)
    return pages


def relative_links(markdown: str) -> list[str]:
    """Link and image targets outside code blocks and code spans, without external URLs or same-page anchors."""
    prose = CODE_SPAN.sub("", FENCE.sub("", markdown))
    return [
        target
        for target in LINK.findall(prose)
        if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) and not target.startswith("#")
    ]


def mkdocs_config() -> dict:
    # mkdocs.yml holds no Python tags, so the safe loader reads all of it.
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = nav_pages(mkdocs_config()["nav"])
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(on_disk) - set(nav)) == [], "pages in docs/ that mkdocs.yml's nav leaves out"
    assert sorted(set(nav) - set(on_disk)) == [], "nav entries without a page in docs/"
    assert len(nav) == len(set(nav)), "a page listed twice in the nav"


@pytest.mark.parametrize(
    "page", [README, *sorted(DOCS.rglob("*.md"))], ids=lambda p: str(Path(p).relative_to(ROOT))
)
def test_every_relative_link_reaches_a_file(page: Path):
    broken = []
    for target in relative_links(page.read_text()):
        path = target.split("#", 1)[0]
        if not (page.parent / path).resolve().exists():
            broken.append(target)
    assert broken == [], f"{page.relative_to(ROOT)}: links to files that do not exist"


def test_the_link_check_sees_links_and_skips_code():
    """The checks above would pass vacuously if the link pattern found nothing."""
    text = (
        "see [a](a.md#x) and ![b](img/b.png), not `[c](c.md)` nor <https://x.org>, [d](https://d.org), [e](#here)\n"
        "```\n[f](f.md)\n```\n"
    )
    assert relative_links(text) == ["a.md#x", "img/b.png"]
    assert "docs/first-migration.md" in relative_links(README.read_text())


def test_the_readme_is_a_front_door():
    text = README.read_text()
    assert len(text.encode()) <= README_MAX_BYTES, "README.md grew past a front door: move the detail to docs/"
    # the two commands a newcomer needs, as the Makefile's first line promises
    assert "make demo   #" in text and "make test   #" in text
    linked = {Path(t.split("#", 1)[0]).name for t in relative_links(text) if t.startswith("docs/")}
    missing = set(nav_pages(mkdocs_config()["nav"])) - linked
    assert missing == set(), "docs pages the README does not link to"


def test_the_site_fetches_nothing():
    """The build runs without network and the pages load nothing from the internet: no web fonts, only the
    built-in search plugin (social cards, privacy downloads and the like fetch at build time)."""
    config = mkdocs_config()
    assert config["theme"]["font"] is False
    assert config.get("plugins", []) == ["search"]
    assert config.get("strict") is True
