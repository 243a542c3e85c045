"""docs/design.md's module map names every module of the four packages, so a newcomer finds each
room's modules in one place and a new module is not left out of it."""

from conftest import REPO


def test_module_map_lists_every_module():
    text = (REPO / "docs" / "design.md").read_text()
    missing = [str(path.relative_to(REPO)) for package in ("parsers", "jobs", "analyzer", "sample_data")
               for path in sorted((REPO / package).rglob("*.py"))
               if path.name != "__init__.py" and f"- `{path.relative_to(REPO)}`: " not in text]
    assert not missing, "add to docs/design.md's module map: " + ", ".join(missing)
