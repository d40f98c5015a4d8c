"""Copy a corpus, turning each work type named in a descriptions file into the corpus format 1.1
long form {classes, description}; the copy is what frame builders are evaluated on.

    python scripts/describe_work_types.py ../shared/benchmarks/book-ch10 \
        ../shared/benchmarks/book-ch10-work-types.yaml /tmp/book-ch10-described

The descriptions file maps project slug -> work type -> one-line description. A work type it names
that the corpus does not list is an error; the source corpus is never changed.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml


def describe(source: Path, descriptions: Path, target: Path) -> list[str]:
    lines = yaml.safe_load(descriptions.read_text())
    if target.exists():
        raise SystemExit(f"{target} exists; choose a new directory")
    shutil.copytree(source, target)
    corpus = yaml.safe_load((target / "corpus.yaml").read_text())
    done = []
    for project in corpus["projects"]:
        wanted = lines.get(project["slug"]) or {}
        work_types = project["frame"].get("work_types") or {}
        for name, description in wanted.items():
            if name not in work_types:
                raise SystemExit(f'{descriptions}: {project["slug"]}.{name}: no such work type in the corpus')
            entry = work_types[name]
            classes = entry["classes"] if isinstance(entry, dict) else entry
            work_types[name] = {"classes": classes, "description": description}
            done.append(f'{project["slug"]}.{name}')
    header = (
        f"# {corpus['name']} with its work types in the corpus format 1.1 long form, written by\n"
        f"# scripts/describe_work_types.py from {source} and {descriptions}\n"
    )
    (target / "corpus.yaml").write_text(
        header + yaml.safe_dump(corpus, sort_keys=False, allow_unicode=True, width=100)
    )
    return done


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    described = describe(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
    print(f"described {len(described)} work types: {', '.join(described)}")
