"""The docs stay whole: every relative link in README.md and docs/ resolves (the file, and the
heading an anchor names), and so does every page, config or script they name in backticks
(`docs/daemon.md`, `configs/htcondor.toml`, `bench/cycle_10k.py`): a page moved or renamed
without its readers fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: A repository path in backticks: docs pages, configs, bench scripts, sweeps.
NAMED = re.compile(r"`((?:docs|configs|bench|sim_grids)/[\w./-]+?)(?:#[\w-]+)?`")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings (lowercase, punctuation dropped, spaces -> -)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def broken(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    found = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            found.append(f"link {target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            found.append(f"link {target}: no heading #{anchor} in {resolved.name}")
    for named in NAMED.findall(text):
        if "*" not in named and not (ROOT / named.rstrip(".")).exists():
            found.append(f"`{named}`: no such file in the repository")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_and_named_file_resolves(page):
    assert broken(page) == []


def test_the_readmes_docs_row_lists_every_page():
    """The README's "Where things live" row for docs/ names every page (and results page)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [row] = [line for line in readme.splitlines() if line.startswith("| `docs/` |")]
    pages = [str(page.relative_to(ROOT / "docs")) for page in (ROOT / "docs").rglob("*.md")]
    assert [page for page in pages if f"`{page}`" not in row] == []


def test_the_guide_lists_every_page():
    """docs/index.md, where a reader starts, names every page of docs/."""
    guide = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    pages = [page.relative_to(ROOT) for page in (ROOT / "docs").rglob("*.md")]
    assert [str(page) for page in pages
            if page.name != "index.md" and f"`{page}`" not in guide] == []


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n[a](missing.md) [b](page.md#title) [c](page.md#nowhere) "
                    "`docs/no-such-page.md`\n")
    assert broken(page) == ["link missing.md: no such file",
                            "link page.md#nowhere: no heading #nowhere in page.md",
                            "`docs/no-such-page.md`: no such file in the repository"]


def test_the_shipped_pool_config_runs_the_policy_the_guide_advises():
    """docs/owner-share.md says which rule to run live; configs/htcondor.toml runs it."""
    from gridfair.daemon.config import load_config

    advice = (ROOT / "docs" / "owner-share.md").read_text(encoding="utf-8")
    assert "**Run `--policy reclaim`" in advice
    assert load_config(ROOT / "configs" / "htcondor.toml")["policy"]["name"] == "reclaim"
