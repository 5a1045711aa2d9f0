"""Every Python example in the README and in docs/ runs, against the real control plane.

A small collector reads the fenced ```python blocks.  Blocks with
``title="name.py"`` in one section are the files of one example project (a
``conftest.py`` and a test file, say); any other block is an example of its
own: a test module if it defines ``test_`` functions, else a script.  Every
test module runs in one inner pytest session (the plugin loads by its entry
point, one control plane for all), every script in a process of its own; each
example is then one test here, which fails with its output.  An example that
collects no test fails too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^```(?P<lang>\w+)?(?P<info>[^\n]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
_HEADING = re.compile(r"^#{1,6} ", re.M)


@dataclass
class Example:
    source: Path
    line: int
    files: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.line}"

    @property
    def slug(self) -> str:
        return re.sub(r"\W+", "_", self.id).strip("_").lower()

    @property
    def is_tests(self) -> bool:
        return any(re.search(r"^def test_", text, re.M) for text in self.files.values())


def collect(path: Path) -> list[Example]:
    """The examples of one Markdown file, in order."""
    text = path.read_text()
    fences = [(m.start(), m.end()) for m in _FENCE.finditer(text)]
    headings = [m.start() for m in _HEADING.finditer(text)
                if not any(start <= m.start() < end for start, end in fences)]
    examples: list[Example] = []
    project: Example | None = None
    project_section = -1
    for match in _FENCE.finditer(text):
        if match.group("lang") != "python":
            continue
        line = text.count("\n", 0, match.start()) + 1
        section = sum(1 for h in headings if h < match.start())
        title = _TITLE.search(match.group("info") or "")
        if title:
            if project is None or section != project_section:
                project = Example(path, line)
                project_section = section
                examples.append(project)
            project.files[title.group("title")] = match.group("body")
            continue
        project = None
        body = match.group("body")
        name = "test_example.py" if re.search(r"^def test_", body, re.M) else "example.py"
        examples.append(Example(path, line, {name: body}))
    return examples


EXAMPLES = [example for source in SOURCES for example in collect(source)]


def _environment() -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS"))}
    environment["ENVTEST_INSTALLED_ONLY"] = "1"  # examples never build binaries
    environment.setdefault("ENVTEST_K8S_VERSION", "1.37")
    # As a user of a busy CI runner would: the README's first wait once took over 10 s
    # with a second make test beside this one (load 21 on 2 cores).
    environment.setdefault("ENVTEST_WAIT_TIMEOUT", "30")
    return environment


@pytest.fixture(scope="session")
def example_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    """Every example's outcome, run once per session even under xdist: the first worker
    to ask runs them and leaves the outcomes in the run's temporary dir, shared by the
    workers (another worker that ran some of these tests waits for it, then reads them)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    outcomes = shared / "docs-examples.json"
    with FileLock(f"{outcomes}.lock"):
        if outcomes.exists():
            return json.loads(outcomes.read_text())
        results = _run_examples(tmp_path_factory.mktemp("examples"))
        outcomes.write_text(json.dumps(results))
        return results


def _run_examples(root: Path) -> dict[str, str | None]:
    """Run every example once: None for a pass, else what went wrong."""
    results: dict[str, str | None] = {}
    modules = [e for e in EXAMPLES if e.is_tests]
    for example in EXAMPLES:
        directory = root / example.slug
        directory.mkdir()
        for name, text in example.files.items():
            (directory / name).write_text(text)
    junit = root / "junit.xml"
    inner = subprocess.run(
        [sys.executable, "-m", "pytest", *[str(root / e.slug) for e in modules], "-q",
         "-p", "no:cacheprovider", "--import-mode=importlib", "--rootdir", str(root),
         f"--junitxml={junit}", "-o", "addopts=", "-o", "junit_family=xunit1"],
        cwd=root, capture_output=True, text=True, timeout=900, env=_environment())
    outcomes: dict[str, list[str]] = {e.slug: [] for e in modules}
    if junit.exists():
        for case in ElementTree.parse(junit).iter("testcase"):
            where = case.get("file") or case.get("classname", "").replace(".", "/")
            slug = Path(where).parts[0] if where else ""
            if slug not in outcomes:
                continue
            problem = next(iter(case.findall("failure") + case.findall("error")
                                + case.findall("skipped")), None)
            outcomes[slug].append(
                "passed" if problem is None else
                f"{problem.tag}: {problem.get('message', '')}\n{problem.text or ''}")
    for slug, cases in outcomes.items():
        if not cases:
            results[slug] = ("collected no test (pytest exit code "
                             f"{inner.returncode}):\n{inner.stdout[-4000:]}\n{inner.stderr[-2000:]}")
        else:
            failed = [c for c in cases if c != "passed"]
            results[slug] = "\n".join(failed)[:6000] if failed else None
    for example in (e for e in EXAMPLES if not e.is_tests):
        directory = root / example.slug
        script = subprocess.run([sys.executable, "example.py"], cwd=directory,
                                capture_output=True, text=True, timeout=300,
                                env=_environment())
        results[example.slug] = (None if script.returncode == 0 else
                                 f"exit code {script.returncode}\n{script.stdout[-3000:]}\n"
                                 f"{script.stderr[-3000:]}")
    return results


def test_the_docs_have_examples() -> None:
    per_source = {s.name: sum(1 for e in EXAMPLES if e.source == s) for s in SOURCES}
    assert per_source["README.md"] >= 1 and sum(per_source.values()) >= 20, per_source


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example(example: Example, example_runs: dict[str, str | None]) -> None:
    problem = example_runs[example.slug]
    assert problem is None, f"{example.id} ({', '.join(example.files)}):\n{problem}"
