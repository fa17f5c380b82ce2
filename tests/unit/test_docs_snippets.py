"""The README's and docs/ pages' snippets, checked with the adapter's own code (no Spark).

- Every fenced ```yaml snippet that configures a model (a `models:` or `config:` block, or
  `schema_contract`, `schema_evolution`, `contract`, `pydantic_contract`) is validated by
  `core/settings/validate.py`'s `validate_node_config`, the check `dbt parse` runs on every node, after
  its keys are checked against dbt's and the adapter's config classes.
- The `config(...)` calls of ```sql and ```python snippets, and the `--vars '{...}'` of ```sh
  snippets, go through the same validation.
- Every profile output with `type: spark_contracts` is parsed as dbt parses a target: dbt's
  `Profile._credentials_from_profile`, which loads this plugin's credentials class.
- Every relative link points to an existing file (and heading, when it names one).

A snippet preceded by `<!-- not-validated: <reason> -->` is skipped (deliberately invalid, or it
needs the reader's project).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from dbt.artifacts.resources import ModelConfig
from dbt.config.profile import Profile
from dbt.contracts.graph.unparsed import UnparsedModelUpdate

from dbt.adapters.spark_contracts.core.settings.config import RUN_VAR_DEFAULTS, ConfigError
from dbt.adapters.spark_contracts.core.settings.validate import NodeConfig, validate_node_config
from dbt.adapters.spark_contracts.impl import SparkContractsConfig

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*$")
NOT_VALIDATED = re.compile(r"^\s*<!--\s*not-validated:\s*\S.*-->\s*$")
# keys that make a YAML snippet a model's configuration (with or without dbt_project's `+`)
MODEL_KEYS = {
    "models",
    "config",
    "schema_contract",
    "schema_evolution",
    "contract",
    "pydantic_contract",
}
RESOURCE_TYPES = {"models": "model", "seeds": "seed", "snapshots": "snapshot"}


def _config_names(cls: Any) -> set[str]:
    names = set()
    for f in dataclasses.fields(cls):
        names.add(f.name)
        if f.metadata.get("alias"):
            names.add(f.metadata["alias"])
    return names - {"_extra"}


# A model's config keys: dbt's own and this adapter's (`AdapterSpecificConfigs`).
CONFIG_KEYS = _config_names(ModelConfig) | _config_names(SparkContractsConfig)
PROPERTY_KEYS = {f.name for f in dataclasses.fields(UnparsedModelUpdate)} - {
    "original_file_path",
    "yaml_key",
    "package_name",
}


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    skipped: bool

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def snippets(page: Path) -> list[Snippet]:
    """Every fenced block of a Markdown page, dedented by its fence's indent."""
    lines = page.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent = opening["indent"]
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != f"{indent}```":
            end += 1
        assert end < len(lines), f"{page.relative_to(ROOT)}:{i + 1}: fence never closed"
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        ]
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        found.append(
            Snippet(
                page,
                i + 1,
                opening["lang"],
                "\n".join(body) + "\n",
                bool(NOT_VALIDATED.match(before)),
            )
        )
        i = end + 1
    return found


ALL_SNIPPETS = [s for page in PAGES for s in snippets(page)]


def _keys(data: Any) -> Iterator[str]:
    if isinstance(data, Mapping):
        for key, value in data.items():
            yield str(key).lstrip("+")
            yield from _keys(value)
    elif isinstance(data, list):
        for item in data:
            yield from _keys(item)


def _outputs(data: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(target name, output) for every `type: spark_contracts` mapping in a profiles.yml."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            if isinstance(value, Mapping) and value.get("type") == "spark_contracts":
                yield str(key), dict(value)
            else:
                yield from _outputs(value)


# ------------------------------------------------------------------ snippets -> node configs


@dataclass
class Node:
    label: str
    config: dict[str, Any]
    resource_type: str = "model"
    language: str = "sql"
    columns: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    constraints: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    run_vars: dict[str, Any] = dataclasses.field(default_factory=dict)


def _check_config_keys(label: str, config: Mapping[str, Any]) -> None:
    unknown = sorted(str(k) for k in config if str(k) not in CONFIG_KEYS)
    assert not unknown, f"{label}: unknown config key(s) {unknown}"


def _project_nodes(label: str, tree: Any, resource: str, inherited: dict) -> Iterator[Node]:
    """dbt_project.yml's `models:` tree: `+key`s (and known config keys) are configs, other
    mappings are folders that inherit them."""
    assert isinstance(tree, Mapping), f"{label}: expected a mapping, got {tree!r}"
    own, folders = {}, {}
    for key, value in tree.items():
        name = str(key)
        if name.startswith("+") or name in CONFIG_KEYS or not isinstance(value, Mapping):
            own[name.lstrip("+")] = value
        else:
            folders[name] = value
    _check_config_keys(label, own)
    merged = {**inherited, **own}
    if own:
        yield Node(label, merged, resource)
    for name, folder in folders.items():
        yield from _project_nodes(f"{label}.{name}", folder, resource, merged)


def _constraints(raw: Any) -> list[dict[str, Any]]:
    return [dict(c) for c in raw or []]


def _property_nodes(label: str, entries: Any, resource: str, yaml_key: str) -> Iterator[Node]:
    """A properties file's `models:` list: one node per entry, with its columns' constraints."""
    for entry in entries:
        name = f"{label}.{entry.get('name')}"
        unknown = sorted(str(k) for k in entry if str(k) not in PROPERTY_KEYS)
        assert not unknown, f"{name}: unknown property key(s) {unknown}"
        required = {"original_file_path": "x.yml", "yaml_key": yaml_key, "package_name": "p"}
        UnparsedModelUpdate.validate({**entry, **required})  # dbt's schema of the entry
        config = dict(entry.get("config") or {})
        _check_config_keys(name, config)
        yield Node(
            name,
            config,
            resource,
            columns={
                c["name"]: _constraints(c.get("constraints")) for c in entry.get("columns") or []
            },
            constraints=_constraints(entry.get("constraints")),
        )


def yaml_nodes(snippet: Snippet) -> list[Node]:
    data = yaml.safe_load(snippet.text)
    shapes = [key for key in RESOURCE_TYPES if isinstance(data, Mapping) and key in data]
    assert shapes, (
        f"{snippet.where}: configures a model but is neither a dbt_project.yml `models:` tree "
        "nor a properties file's `models:` list; mark it <!-- not-validated: why -->"
    )
    nodes: list[Node] = []
    for key in shapes:
        resource = RESOURCE_TYPES[key]
        if isinstance(data[key], list):
            nodes += _property_nodes(snippet.where, data[key], resource, key)
        else:
            nodes += _project_nodes(f"{snippet.where}:{key}", data[key], resource, {})
    assert nodes, f"{snippet.where}: no model configuration found in it"
    return nodes


_JINJA_CONSTANTS = {"true": True, "false": False, "none": None}


def _literal(node: ast.expr) -> Any:
    """A config() argument as Jinja or Python writes it (Jinja also spells true/false/none)."""
    if isinstance(node, ast.Name) and node.id.lower() in _JINJA_CONSTANTS:
        return _JINJA_CONSTANTS[node.id.lower()]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.List):
        return [_literal(v) for v in node.elts]
    return ast.literal_eval(node)


def config_call_nodes(snippet: Snippet) -> list[Node]:
    """Each `config(...)` call of a SQL model (`{{ config(...) }}`) or Python model
    (`dbt.config(...)`), its keyword arguments as the model's config."""
    text = snippet.text
    if snippet.lang == "sql":
        text = re.sub(r"--[^\n]*", "", text)  # SQL comments inside the call
    nodes = []
    for match in re.finditer(r"\bconfig\(", text):
        call = None
        for end in (m.end() for m in re.finditer(r"\)", text[match.start() :])):
            try:
                call = ast.parse(text[match.start() : match.start() + end], mode="eval").body
                break
            except SyntaxError:
                continue
        assert isinstance(call, ast.Call), f"{snippet.where}: cannot read its config() call"
        assert not call.args, f"{snippet.where}: config() takes keyword arguments only"
        config = {str(k.arg): _literal(k.value) for k in call.keywords}
        _check_config_keys(snippet.where, config)
        language = "python" if snippet.lang == "python" else "sql"
        nodes.append(Node(f"{snippet.where}:config()", config, language=language))
    return nodes


def run_var_nodes(snippet: Snippet) -> list[Node]:
    """Each `--vars '{...}'` of a shell snippet, as the run vars of a model with no config."""
    nodes = []
    for match in re.finditer(r"--vars\s+'([^']*)'", snippet.text):
        run_vars = yaml.safe_load(match[1])
        assert isinstance(run_vars, Mapping), f"{snippet.where}: --vars {match[1]!r}"
        nodes.append(Node(f"{snippet.where}:--vars {match[1]}", {}, run_vars=dict(run_vars)))
    return nodes


def validate(node: Node) -> None:
    """`validate_node_config`, as `dbt parse` runs it on the node (raises `ConfigError`)."""
    enforced = node.config.get("contract") or {}
    validate_node_config(
        NodeConfig(
            model=node.label,
            config=node.config,
            run_vars={**RUN_VAR_DEFAULTS, **node.run_vars},
            constraints=node.constraints,
            columns=node.columns,
            contract_enforced=bool(isinstance(enforced, Mapping) and enforced.get("enforced")),
            language=node.language,
            resource_type=node.resource_type,
            materialized=node.config.get("materialized"),
        )
    )


# -------------------------------------------------------------------------------- the tests


def _yaml(snippet: Snippet) -> Any:
    try:
        return yaml.safe_load(snippet.text)
    except yaml.YAMLError as exc:
        pytest.fail(f"{snippet.where}: not valid YAML: {exc}")


def _loaded(snippet: Snippet) -> Any:
    """The snippet's YAML, or None when it does not parse (`test_yaml_snippet_parses` says so)."""
    try:
        return yaml.safe_load(snippet.text)
    except yaml.YAMLError:
        return None


YAML_SNIPPETS = [s for s in ALL_SNIPPETS if s.lang in ("yaml", "yml") and not s.skipped]
MODEL_YAML = [s for s in YAML_SNIPPETS if MODEL_KEYS & set(_keys(_loaded(s)))]
PROFILE_YAML = [s for s in YAML_SNIPPETS if any(_outputs(_loaded(s)))]
CODE_CONFIG = [
    s
    for s in ALL_SNIPPETS
    if s.lang in ("sql", "python") and not s.skipped and re.search(r"\bconfig\(", s.text)
]
SHELL_VARS = [
    s for s in ALL_SNIPPETS if s.lang in ("sh", "bash") and not s.skipped and "--vars" in s.text
]


def _ids(found: list[Snippet]) -> list[str]:
    return [s.where for s in found]


def test_the_pages_have_snippets_to_check():
    """Guard against a test that passes because it found nothing (a changed fence format)."""
    assert len(MODEL_YAML) >= 5, _ids(MODEL_YAML)
    assert len(PROFILE_YAML) >= 3, _ids(PROFILE_YAML)
    assert len(CODE_CONFIG) >= 4, _ids(CODE_CONFIG)
    assert len(SHELL_VARS) >= 3, _ids(SHELL_VARS)


@pytest.mark.parametrize("snippet", YAML_SNIPPETS, ids=_ids(YAML_SNIPPETS))
def test_yaml_snippet_parses(snippet: Snippet):
    _yaml(snippet)


@pytest.mark.parametrize("snippet", MODEL_YAML, ids=_ids(MODEL_YAML))
def test_model_config_snippet_is_valid(snippet: Snippet):
    for node in yaml_nodes(snippet):
        try:
            validate(node)
        except ConfigError as exc:
            pytest.fail(str(exc))


@pytest.mark.parametrize("snippet", CODE_CONFIG, ids=_ids(CODE_CONFIG))
def test_config_call_in_a_model_is_valid(snippet: Snippet):
    for node in config_call_nodes(snippet):
        try:
            validate(node)
        except ConfigError as exc:
            pytest.fail(str(exc))


@pytest.mark.parametrize("snippet", SHELL_VARS, ids=_ids(SHELL_VARS))
def test_run_vars_in_a_command_are_valid(snippet: Snippet):
    for node in run_var_nodes(snippet):
        try:
            validate(node)
        except ConfigError as exc:
            pytest.fail(str(exc))


@pytest.mark.parametrize("snippet", PROFILE_YAML, ids=_ids(PROFILE_YAML))
def test_profile_snippet_parses_as_credentials(snippet: Snippet):
    for target, output in _outputs(_yaml(snippet)):
        output.pop("threads", None)  # dbt reads threads off the target, not the credentials
        credentials = Profile._credentials_from_profile(output, "docs", target)
        assert credentials.type == "spark_contracts"
        assert credentials.method == output.get("method", "session")


# ------------------------------------------------------------------------------------ links

LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    fenced = {n for s in snippets(page) for n in range(s.line, s.line + s.text.count("\n") + 2)}
    seen: dict[str, int] = {}
    found = set()
    for n, line in enumerate(page.read_text().splitlines(), start=1):
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if not heading or n in fenced:
            continue
        slug = _slug(heading[1])
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def links(page: Path) -> Iterator[tuple[int, str]]:
    fenced = {n for s in snippets(page) for n in range(s.line, s.line + s.text.count("\n") + 2)}
    for n, line in enumerate(page.read_text().splitlines(), start=1):
        if n in fenced:
            continue
        for match in LINK.finditer(line):
            target = match["target"]
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # not http:, https:, mailto:
                yield n, target


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page: Path):
    broken = []
    for n, target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_file():
            broken.append(f"{page.relative_to(ROOT)}:{n}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{page.relative_to(ROOT)}:{n}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for _, t in links(ROOT / "README.md")}
    missing = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"
