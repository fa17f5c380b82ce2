"""Codemod: put each module of `dbt/adapters/spark_contracts/core/` into the folder of core that
names its part of the architecture (MAPPING below), and rewrite every reference to it.

    python spark_contracts_dev/reorganize_core.py [--dry-run] [--no-format]

From the repository root (any directory inside it works). Steps:

1. Refuse (exit 1, naming the file) a module directly in core/ that MAPPING does not place, or a
   module found both in core/ and in its folder.
2. Inside the package, make every relative import that reaches core absolute (core's own imports
   all become absolute: one style).
3. `from dbt.adapters.spark_contracts.core import <module>` -> `from ...core.<folder> import`.
4. Every dotted name `[...spark_contracts.]core.<module>` -> `...core.<folder>.<module>`
   and every path `core/<module>` -> `core/<folder>/<module>` in the repository's Python, SQL
   (Jinja comments), Markdown, ini/toml/cfg, Makefile and CI files (not CHANGELOG.md, which
   records what the files were called then, and not this script).
5. `git mv core/<module>.py core/<folder>/<module>.py`; each folder gets an `__init__.py` (its
   docstring from FOLDERS) if it has none.
6. `ruff check --fix` and `ruff format` on the Python files it touched that `make lint` checks.

Idempotent: a second run finds nothing to move or rewrite and changes nothing. Run it again after
merging: it also rewrites references to a module's old place that were written meanwhile.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

# The folders of core/, each with the docstring of its __init__.py.
FOLDERS: dict[str, str] = {
    "schema": "Typed Spark schemas: the type model, its parsers (DDL, catalog strings, schema "
    "JSON), the diff of a deployed schema against a compiled one, the one struct merge and the "
    "one cast renderer.",
    "evolution": "Schema evolution: what each table format can change in place (the capability "
    "table), each change's class and the model's change policy, the planned operations and "
    "their SQL, the row-keeping rewrite and `on_*_change: ignore`'s fitted schema.",
    "contracts": "Data contracts: the schema contract (dlt's modes) and what it decides for a "
    "run, declared (Pydantic) contracts and their value checks, dbt's enforced contract and "
    "constraints, the contract's one load SELECT with its checked casts, the quarantine table.",
    "materialization": "One model build, decided before its first statement: the run plan, the "
    "write path, the typed load, microbatch windows, snapshots, the creating run, `dbt clone`, "
    "Python models.",
    "recovery": "Runs that survive a crash or a concurrent run: the durable intent, the pending "
    "table's protocol, the model's lease, the rebuild swapped in by two renames.",
    "report": "What a run tells: the console lines, the dry run's plan file, the run history, "
    "the docs catalog's rows.",
    "settings": "What the user configured: model config and run vars validated into a `Policy`, "
    "the one validation of a node's config, the connection's endpoint and retry policy, "
    "`query_timeout`.",
}

# module of core/ -> its folder. A new module of core/ needs a row here (the script refuses to
# run while one is missing) or must be created in its folder.
MAPPING: dict[str, str] = {
    # schema
    "types": "schema",
    "parse": "schema",
    "diff": "schema",
    "merge": "schema",
    "coerce": "schema",
    # evolution
    "capabilities": "evolution",
    "change_policy": "evolution",
    "operations": "evolution",
    "plan": "evolution",
    "rewrite": "evolution",
    "render": "evolution",
    "fit": "evolution",
    # contracts
    "contract": "contracts",
    "decision": "contracts",
    "enforce": "contracts",
    "checks": "contracts",
    "checked_cast": "contracts",
    "load_select": "contracts",
    "pydantic_contract": "contracts",
    "model_contract": "contracts",
    "constraints": "contracts",
    "constraint_checks": "contracts",
    "quarantine": "contracts",
    # materialization
    "run_plan": "materialization",
    "write_path": "materialization",
    "load": "materialization",
    "microbatch": "materialization",
    "snapshot": "materialization",
    "create_run": "materialization",
    "clone": "materialization",
    "python_model": "materialization",
    # recovery
    "intent": "recovery",
    "pending": "recovery",
    "lease": "recovery",
    "swap": "recovery",
    # report
    "outcome": "report",
    "catalog": "report",
    # settings
    "config": "settings",
    "validate": "settings",
    "endpoint": "settings",
    "deadline": "settings",
}

PACKAGE = "dbt.adapters.spark_contracts"
CORE = f"{PACKAGE}.core"
CORE_PATH = Path("dbt/adapters/spark_contracts/core")
TEXT_SUFFIXES = {
    ".py",
    ".pyi",
    ".md",
    ".sql",
    ".ini",
    ".toml",
    ".cfg",
    ".in",
    ".sh",
    ".yml",
    ".yaml",
    ".txt",
}
TEXT_NAMES = {"Makefile", "run"}  # .ci/run
LINTED = ("dbt", "tests", "spark_contracts_dev", "benchmarks", "integration_tests")  # `make lint`
SKIP = {"CHANGELOG.md", "spark_contracts_dev/reorganize_core.py"}


class Refused(Exception):
    """The tree is not one this script can reorganize; the message says why and where."""


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise Refused(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def check_tables() -> None:
    unknown = sorted({f for f in MAPPING.values() if f not in FOLDERS})
    if unknown:
        raise Refused(f"MAPPING names folders without a FOLDERS row: {unknown}")
    clash = sorted(set(FOLDERS) & set(MAPPING))
    if clash:  # core.<folder> must never read as core.<old module>: the rewrite keys on it
        raise Refused(f"a folder has a module's name: {clash}")


def plan_moves(root: Path) -> list[tuple[Path, Path]]:
    """(old, new) paths of the modules still directly in core/; refuses an unmapped one."""
    core = root / CORE_PATH
    if not core.is_dir():
        raise Refused(f"{CORE_PATH} not found under {root}")
    unmapped = [
        p for p in sorted(core.glob("*.py")) if p.name != "__init__.py" and p.stem not in MAPPING
    ]
    if unmapped:
        names = ", ".join(str(p.relative_to(root)) for p in unmapped)
        raise Refused(
            f"core module(s) not in MAPPING: {names}. Add a row to MAPPING in "
            f"spark_contracts_dev/reorganize_core.py (module -> folder), then run again."
        )
    moves = []
    for module, folder in MAPPING.items():
        old, new = core / f"{module}.py", core / folder / f"{module}.py"
        if old.exists() and new.exists():
            raise Refused(f"{old.relative_to(root)} and {new.relative_to(root)} both exist")
        if old.exists():
            moves.append((old, new))
    return moves


def candidate_files(root: Path) -> list[Path]:
    listed = git(root, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    files = []
    for name in sorted(set(listed.split("\0")) - {""}):
        path = root / name
        if name in SKIP or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES:
            files.append(path)
    return files


def module_of(root: Path, path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".")
    keep = len(base) - level + (1 if is_package else 0)
    return ".".join(base[:keep] + ([name] if name else []))


def in_core(name: str) -> bool:
    return name == CORE or name.startswith(CORE + ".")


def replace_lines(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Replace 1-based inclusive line ranges, last first."""
    lines = text.splitlines(keepends=True)
    for first, last, new in sorted(edits, reverse=True):
        lines[first - 1 : last] = [new]
    return "".join(lines)


def statement(node: ast.ImportFrom, lines: list[str]) -> tuple[int, int, list[str]]:
    """The import's line range and its comments; refuses an import sharing a line with code."""
    first, last = node.lineno, node.end_lineno or node.lineno
    head = lines[first - 1][: node.col_offset]
    tail = lines[last - 1][node.end_col_offset or 0 :].strip()
    if head.strip() or (tail and not tail.startswith("#")):
        raise Refused(f"line {first}: an import sharing its line with other code")
    return first, last, re.findall(r"#.*", "".join(lines[first - 1 : last]))


def spell(alias: ast.alias) -> str:
    return alias.name + (f" as {alias.asname}" if alias.asname else "")


def rewrite_relative(root: Path, path: Path, text: str) -> str:
    """Relative imports that reach core (all of core's own) become absolute."""
    if not path.suffix == ".py" or not path.relative_to(root).parts[:3] == (
        "dbt",
        "adapters",
        "spark_contracts",
    ):
        return text
    module, is_package = module_of(root, path)
    tree = ast.parse(text, str(path))
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level):
            continue
        target = absolute(module, is_package, node.level, node.module)
        if not (in_core(target) or in_core(module)):
            continue
        first, last, _ = statement(node, lines)
        source = "".join(lines[first - 1 : last])
        dots = "." * node.level + (node.module or "")
        new, count = re.subn(
            rf"^(\s*from\s+){re.escape(dots)}(\s+import\b)", rf"\g<1>{target}\g<2>", source
        )
        if count != 1:
            raise Refused(f"{path.relative_to(root)}:{first}: cannot rewrite {dots!r}")
        edits.append((first, last, new))
    return replace_lines(text, edits) if edits else text


def rewrite_core_module_imports(root: Path, path: Path, text: str) -> str:
    """`from ...core import <module>, Name` -> one import from each module's folder."""
    if path.suffix != ".py" or "spark_contracts.core import" not in text:
        return text
    tree = ast.parse(text, str(path))
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == CORE):
            continue
        moved = [a for a in node.names if a.name in MAPPING]
        if not moved:
            continue
        first, last, comments = statement(node, lines)
        indent = lines[first - 1][: node.col_offset]
        kept = [a for a in node.names if a.name not in MAPPING]
        out = []
        if kept:
            out.append(f"{indent}from {CORE} import {', '.join(spell(a) for a in kept)}\n")
        for alias in moved:
            out.append(f"{indent}from {CORE}.{MAPPING[alias.name]} import {spell(alias)}\n")
        if comments:  # kept on the first import: a noqa stays where it applies
            out[0] = out[0].rstrip("\n") + "  " + " ".join(comments) + "\n"
        edits.append((first, last, "".join(out)))
    return replace_lines(text, edits) if edits else text


MODULES = "|".join(sorted(MAPPING, key=len, reverse=True))
DOTTED = re.compile(rf"(?<![\w-])core\.({MODULES})\b")  # also `...spark_contracts.core.x`
SLASHED = re.compile(rf"(?<![\w-])core/({MODULES})\b")


def rewrite_names(text: str) -> str:
    text = DOTTED.sub(lambda m: f"core.{MAPPING[m[1]]}.{m[1]}", text)
    return SLASHED.sub(lambda m: f"core/{MAPPING[m[1]]}/{m[1]}", text)


def ruff(root: Path, files: list[Path]) -> None:
    if not files:
        return
    beside = Path(sys.executable).parent / "ruff"
    exe = str(beside) if beside.exists() else "ruff"
    names = [str(f.relative_to(root)) for f in files]
    for args in (["check", "--fix", "--quiet", *names], ["format", "--quiet", *names]):
        done = subprocess.run([exe, *args], cwd=root)
        if done.returncode != 0:
            raise Refused(f"ruff {args[0]} failed on the rewritten files (see above)")


def run(root: Path, dry_run: bool, fmt: bool) -> int:
    check_tables()
    moves = plan_moves(root)
    touched: dict[Path, str] = {}
    for path in candidate_files(root):
        before = path.read_text(encoding="utf-8")
        try:
            after = rewrite_relative(root, path, before)
            after = rewrite_core_module_imports(root, path, after)
        except (Refused, SyntaxError) as error:
            raise Refused(f"{path.relative_to(root)}: {error}") from error
        after = rewrite_names(after)
        if after != before:
            touched[path] = after
    core = root / CORE_PATH
    inits = [
        core / f / "__init__.py"
        for f in sorted(set(MAPPING.values()))
        if not (core / f / "__init__.py").exists()
    ]
    for old, new in moves:
        print(f"move    {old.relative_to(root)} -> {new.relative_to(root)}")
    for path in inits:
        print(f"create  {path.relative_to(root)}")
    for path in touched:
        print(f"rewrite {path.relative_to(root)}")
    if not (moves or inits or touched):
        print("core/ is already in its folders; nothing to do")
        return 0
    if dry_run:
        return 0
    for path, text in touched.items():
        path.write_text(text, encoding="utf-8")
    for path in inits:
        folder = path.parent.name
        path.parent.mkdir(exist_ok=True)
        doc = textwrap.fill(FOLDERS[folder], 96)
        path.write_text(f'"""{doc}"""\n', encoding="utf-8")
        git(root, "add", str(path.relative_to(root)))
    for old, new in moves:
        new.parent.mkdir(exist_ok=True)
        git(root, "mv", str(old.relative_to(root)), str(new.relative_to(root)))
    moved = {old: new for old, new in moves}
    python = [
        moved.get(p, p)
        for p in touched
        if p.suffix == ".py" and p.relative_to(root).parts[0] in LINTED
    ]
    if fmt:
        ruff(root, python + inits)
    print(
        f"moved {len(moves)} modules, rewrote {len(touched)} files, "
        f"created {len(inits)} __init__.py"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dry-run", action="store_true", help="print what it would do, change nothing"
    )
    parser.add_argument(
        "--no-format", action="store_true", help="skip ruff check --fix / ruff format"
    )
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent
    try:
        root = Path(git(here, "rev-parse", "--show-toplevel").strip())
        return run(root, args.dry_run, not args.no_format)
    except Refused as error:
        print(f"reorganize_core: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
