"""Code, configs and documents say what is and why, never when: no words of the project's history
("formerly", "no longer", "this round", ...) in the repository's text files. The history belongs
in CHANGELOG.md (not scanned) and in the commits; a measurement's date and load belong in its data
file's rows."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.helpers import REPO

SUFFIXES = (".py", ".smk", ".yaml", ".yml", ".toml", ".md", ".cfg", ".rst")
NAMES = ("Snakefile",)
NOT_SCANNED = ("CHANGELOG.md", Path(__file__).resolve().relative_to(REPO).as_posix())  # this file lists the words
HISTORY = ("former", "formerly", "this round", "last round", "predate", "predates", "at the start of this work",
           "no gpu was lent", "used to be", "previously", "no longer", "anymore")
# whole words; a phrase may wrap onto the next line of a comment or a paragraph
PATTERN = re.compile(r"\b(?:" + "|".join(r"[\s#]+".join(map(re.escape, w.split())) for w in HISTORY) + r")\b",
                     re.IGNORECASE)
# Lines where such a word is not history: (file, a fragment of the line) and why.
ALLOWED = {
    "src/affine_homotopy/models/synthetic_vocabulary.py": ("the former post office building",),  # a sentence (data)
    "src/affine_homotopy/study/lock.py": ("entry the config no longer",),  # a user's config edited after its lock
}


def scanned_files() -> list[str]:
    """Tracked files and new ones not ignored (``git ls-files``), of the scanned kinds."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=True).stdout.split("\0")
    return sorted(name for name in set(listed)
                  if name and (name.endswith(SUFFIXES) or Path(name).name in NAMES) and name not in NOT_SCANNED
                  and (REPO / name).is_file())


def history_words(name: str, text: str) -> list[str]:
    """``file:line: the line`` for every history word of ``text`` outside ALLOWED."""
    lines = text.splitlines()
    found = []
    for match in PATTERN.finditer(text):
        first = text.count("\n", 0, match.start())
        context = " ".join(lines[first:text.count("\n", 0, match.end()) + 1])
        if not any(fragment in context for fragment in ALLOWED.get(name, ())):
            found.append(f"{name}:{first + 1}: {match[0]!r} in {lines[first].strip()[:140]}")
    return found


def test_no_words_of_history_in_the_repository() -> None:
    files = scanned_files()
    assert len(files) > 100 and "README.md" in files and "workflow/Snakefile" in files, len(files)
    found = [hit for name in files for hit in history_words(name, (REPO / name).read_text(encoding="utf-8"))]
    assert not found, ("words of history (say what is and why, not when; history goes in CHANGELOG.md):\n  "
                       + "\n  ".join(found))


def test_the_scan_finds_whole_words_and_wrapped_phrases_only() -> None:
    text = ("x = 1  # the formerly used path\n"
            "y = 2  # a value that is no\n"
            "       # longer read\n"
            "z = former_name + unformerly + previously_seen  # identifiers and parts of words are fine\n"
            "Used to BE here.\n")
    hits = history_words("example.py", text)
    assert [hit.split(":")[1] for hit in hits] == ["1", "2", "5"], hits
    allowed = "visit the former post office building\n"
    assert history_words("src/affine_homotopy/models/synthetic_vocabulary.py", allowed) == []
    assert history_words("other.py", allowed) != []  # allowed in that file only
