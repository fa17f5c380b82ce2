"""Bad adapter config fails `dbt parse`, `dbt compile` and `dbt ls` (SPEC §2, §5): one line per
bad node naming the model and its file, the key, the bad value and the allowed values.

Config comes from every level dbt merges (dbt_project.yml folders, properties yml, `config()`,
Python `dbt.config()`), and run vars from `--vars` and dbt_project.yml `vars:`. Parsing needs no
Spark: these classes keep dbt's project fixture from creating the test schema, so no JVM starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dbt.exceptions import ParsingError
from dbt.tests.fixtures.project import TestProjInfo
from dbt.tests.util import run_dbt

MODES = "evolve, freeze, discard_row, discard_value"
INC = "{{ config(materialized='incremental', %s) }}\nselect 1 as id, 'x' as note"


@pytest.fixture(scope="class", autouse=True)
def no_test_schema():
    """Parse-only classes: the project fixture would create (and drop) the test schema, which
    starts Spark. Nothing here touches the database."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TestProjInfo, "create_test_schema", lambda self, schema_name=None: None)
        patch.setattr(TestProjInfo, "drop_test_schema", lambda self: None)
        yield


def parse_error(args: list[str], events: list[str] | None = None) -> str:
    callbacks = [lambda msg: events.append(msg.info.name)] if events is not None else None
    with pytest.raises(ParsingError) as info:
        run_dbt(args, callbacks=callbacks)
    return str(info.value)


def line_of(message: str, model: str) -> str:
    lines = [line.strip() for line in message.splitlines() if f"model.test.{model} (" in line]
    assert len(lines) == 1, (model, message)
    return lines[0]


# model -> (file, parts of its error line: the key, the bad value, the allowed values)
BAD = {
    "contract_mode": ("models/contract_mode.sql", ["`schema_contract` is 'fly'", MODES]),
    "contract_entity_mode": (
        "models/contract_entity_mode.sql",
        ["`schema_contract.columns` is 'fly'", f"allowed: {MODES}"],
    ),
    "contract_entity": (
        "models/contract_entity.sql",
        ["`schema_contract` has unknown key(s) colums", "allowed: tables, columns, data_type"],
    ),
    "evolution_key": (
        "models/evolution_key.sql",
        ["`schema_evolution` has unknown key(s) stratgy", "allowed: strategy, columns"],
    ),
    "evolution_strategy": (
        "models/evolution_strategy.sql",
        ["`schema_evolution.strategy` is 'yolo'", "allowed: alter_and_backfill, full_refresh"],
    ),
    "evolution_column_key": (
        "models/evolution_column_key.sql",
        ["`schema_evolution.columns.note` has unknown key(s) defualt", "default, backfill"],
    ),
    "evolution_default_type": (
        "models/evolution_default_type.sql",
        ["`schema_evolution.columns.note.default`", "['a']", "SQL expression"],
    ),
    "on_schema_change": (
        "models/on_schema_change.sql",
        ["`on_schema_change` is 'append'", "ignore, fail, append_new_columns, sync_all_columns"],
    ),
    # from the properties yml
    "yml_contract": (
        "models/yml_contract.sql",
        ["`schema_contract.data_type` is 'fly'", MODES],
    ),
    # from a dbt_project.yml folder
    "folder_model": (
        "models/folder/folder_model.sql",
        ["`schema_contract.tables` is 'sometimes'", MODES],
    ),
    "check_no_expression": (
        "models/check_no_expression.sql",
        ["`constraints[0]` is a `check` constraint with expression None", "boolean SQL"],
    ),
    "column_check_no_expression": (
        "models/column_check_no_expression.sql",
        ["`columns.id.constraints[0]` is a `check` constraint with expression None"],
    ),
    "undeclared_column": (
        "models/undeclared_column.sql",
        ["`constraints[0].columns` names idd", "allowed: id, note"],
    ),
    "py_contract": ("models/py_contract.py", ["`schema_contract` is 'fly'", MODES]),
    "evolution_undeclared": (
        "models/evolution_undeclared.sql",
        ["`schema_evolution.columns` names nope", "enforced contract", "allowed: id, note"],
    ),
    "variant_style": (
        "models/variant_style.sql",
        ["`schema_contract.variant_columns` is 'json'", "allowed: typed, native"],
    ),
    # a format that cannot store a VARIANT column, named with the way out
    "variant_parquet": (
        "models/variant_parquet.sql",
        ["variant_columns` is 'native'", "file_format 'parquet'", "variant_columns: typed"],
    ),
    "variant_iceberg_v2": (
        "models/variant_iceberg_v2.sql",
        ["Iceberg format-version 2", "'format-version': '3'", "variant_columns: typed"],
    ),
    "variant_iceberg_merge": (
        "models/variant_iceberg_merge.sql",
        [
            "'native' on an Iceberg merge model",
            "BaseScan.includeColumnStats",
            "variant_columns: typed",
        ],
    ),
}

PROPERTIES = """
version: 2
models:
  - name: yml_contract
    config:
      schema_contract: {data_type: fly}
  - name: folder_fixed
    config:
      schema_contract: {tables: evolve}
  - name: check_no_expression
    constraints:
      - type: check
    columns:
      - name: id
  - name: column_check_no_expression
    columns:
      - name: id
        constraints:
          - type: check
  - name: undeclared_column
    constraints:
      - type: not_null
        columns: [idd]
    columns:
      - name: id
      - name: note
  - name: evolution_undeclared
    config:
      contract: {enforced: true}
      on_schema_change: fail
    columns:
      - name: id
        data_type: int
      - name: note
        data_type: string
"""

CUSTOM_MATERIALIZATION = """
{% materialization custom_mat, default %}
  {{ return({'relations': []}) }}
{% endmaterialization %}
"""

SNAPSHOT = """
{% snapshot snap %}
{{ config(unique_key='id', strategy='check', check_cols='all', schema_contract='fly') }}
select 1 as id
{% endsnapshot %}
"""
SNAPSHOT_IGNORE = """
{% snapshot snap_ignore %}
{{ config(unique_key='id', strategy='check', check_cols='all',
          schema_evolution={'on_destructive_change': 'ignore'}) }}
select 1 as id
{% endsnapshot %}
"""


class TestBadConfigFailsParse:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {
            "models": {"test": {"folder": {"+schema_contract": {"tables": "sometimes"}}}},
        }

    @pytest.fixture(scope="class")
    def models(self):
        plain = "select 1 as id, 'x' as note"
        return {
            "contract_mode.sql": INC % "schema_contract='fly'",
            "contract_entity_mode.sql": INC % "schema_contract={'columns': 'fly'}",
            "contract_entity.sql": INC % "schema_contract={'colums': 'freeze'}",
            "evolution_key.sql": INC % "schema_evolution={'stratgy': 'full_refresh'}",
            "evolution_strategy.sql": INC % "schema_evolution={'strategy': 'yolo'}",
            "evolution_column_key.sql": INC
            % "schema_evolution={'columns': {'note': {'defualt': '1'}}}",
            "evolution_default_type.sql": INC
            % "schema_evolution={'columns': {'note': {'default': ['a']}}}",
            "on_schema_change.sql": INC % "on_schema_change='append'",
            "evolution_undeclared.sql": INC
            % "schema_evolution={'columns': {'nope': {'default': '1'}}}",
            "variant_style.sql": INC % "schema_contract={'variant_columns': 'json'}",
            "variant_parquet.sql": INC
            % "file_format='parquet', schema_contract={'variant_columns': 'native'}",
            "variant_iceberg_v2.sql": INC
            % "file_format='iceberg', tbl_properties={'format-version': '2'}, "
            "schema_contract={'variant_columns': 'native'}",
            "variant_iceberg_merge.sql": INC
            % "file_format='iceberg', incremental_strategy='merge', unique_key='id', "
            "schema_contract={'variant_columns': 'native'}",
            "yml_contract.sql": "{{ config(materialized='table') }}\n" + plain,
            "check_no_expression.sql": plain,
            "column_check_no_expression.sql": plain,
            "undeclared_column.sql": plain,
            "py_contract.py": (
                "def model(dbt, session):\n"
                "    dbt.config(materialized='table', schema_contract='fly')\n"
                "    return session.sql('select 1 as id')\n"
            ),
            "folder": {
                "folder_model.sql": plain,
                "folder_fixed.sql": plain,  # the properties yml sets a good value over the folder's
            },
            # not this adapter's to judge: ephemeral, or built by the project's own materialization
            "ephemeral_model.sql": "{{ config(materialized='ephemeral', schema_contract='fly') }}\n"
            + plain,
            "custom_model.sql": "{{ config(materialized='custom_mat', schema_contract='fly',"
            " on_schema_change='whatever') }}\n" + plain,
            "good.sql": INC % "schema_contract={'columns': 'freeze', 'quarantine': true},"
            " schema_evolution={'strategy': 'full_refresh', 'columns': {'note': {'default': \"'n'\"}}},"
            " on_schema_change='fail'",
            "properties.yml": PROPERTIES,
        }

    @pytest.fixture(scope="class")
    def macros(self):
        return {"custom_mat.sql": CUSTOM_MATERIALIZATION}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"snap.sql": SNAPSHOT}

    @pytest.fixture(scope="class")
    def message(self, project) -> str:
        return parse_error(["parse"])

    @pytest.mark.parametrize("name", BAD, ids=list(BAD))
    def test_bad_key_names_model_file_key_value_and_allowed(self, message, name):
        path, parts = BAD[name]
        line = line_of(message, name)
        assert line.startswith(f"model.test.{name} ({path}): "), line
        for part in parts:
            assert part in line, (part, line)

    def test_snapshots_are_checked(self, message):
        assert "snapshot.test.snap (snapshots/snap.sql): `schema_contract` is 'fly'" in message

    def test_good_final_and_foreign_configs_are_not_reported(self, message):
        for name in ("good", "folder_fixed", "ephemeral_model", "custom_model"):
            assert f"model.test.{name} " not in message, name
        assert len(message.splitlines()) == 1 + len(BAD) + 1  # heading, models, the snapshot

    def test_nothing_written(self, project, message):
        assert not (Path(project.project_root) / "target" / "manifest.json").exists()

    def test_partial_parse_validates_again(self, project, message):
        saved = Path(project.project_root) / "target" / "partial_parse.msgpack"
        assert saved.exists()  # dbt kept its parse state: the next parse starts from it
        events: list[str] = []
        assert parse_error(["parse"], events) == message
        assert "PartialParsingSkipParsing" in events  # no file re-read: the saved nodes checked
        assert "UnableToPartialParse" not in events

    def test_compile_fails(self, message):
        assert parse_error(["compile"]) == message

    def test_ls_fails(self, message):
        assert parse_error(["ls"]) == message


SNAPSHOT_QUARANTINE = """
{% snapshot snap_quarantine %}
{{ config(unique_key='id', strategy='check', check_cols='all',
          schema_contract={'columns': 'freeze', 'quarantine': true}) }}
select 1 as id
{% endsnapshot %}
"""


class TestIgnoreOnASnapshotFailsParse:
    """`ignore` would make a snapshot record false changes: refused at parse, not at run."""

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"snap_ignore.sql": SNAPSHOT_IGNORE}

    def test_it_names_the_snapshot_the_key_and_what_is_allowed(self, project):
        message = parse_error(["parse"])
        assert (
            "snapshot.test.snap_ignore (snapshots/snap_ignore.sql): "
            "`schema_evolution.on_destructive_change` is 'ignore' on a snapshot"
        ) in message
        assert "allowed on snapshots: allow, warn, error" in message


class TestQuarantineOnASnapshotFailsParse:
    """A snapshot discards nothing, so its quarantine would stay empty: `quarantine: true`
    is refused when dbt parses the project, naming what snapshots allow."""

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"snap_quarantine.sql": SNAPSHOT_QUARANTINE}

    def test_it_names_the_snapshot_and_what_is_allowed(self, project):
        message = parse_error(["parse"])
        assert "snapshot.test.snap_quarantine" in message
        assert "schema_contract quarantine: true is not supported on snapshots" in message
        assert "quarantine false" in message


class TestGoodConfigParsesAndVarsAreChecked:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "evolving.sql": INC % "schema_evolution={'strategy': 'alter_and_backfill'}",
            "contracted.sql": INC % "schema_contract='freeze'",
            "properties.yml": """
version: 2
models:
  - name: contracted
    constraints:
      - type: check
        expression: "id > 0"
      - type: not_null
        columns: [ID]
    columns:
      - name: id
        constraints:
          - type: not_null
      - name: note
""",
        }

    def test_good_config_parses(self, project):
        run_dbt(["parse"])
        assert (Path(project.project_root) / "target" / "manifest.json").exists()

    @pytest.mark.parametrize(
        ("vars_", "parts"),
        [
            (
                "{allow_full_refresh: maybe}",
                ["`allow_full_refresh` must be true or false", "'maybe'"],
            ),
            (
                "{schema_evolution_dry_run: 3}",
                ["`schema_evolution_dry_run` must be true or false, got 3"],
            ),
            (
                "{schema_contract: {tables: fly}}",
                ["`--vars schema_contract.tables` is 'fly'", MODES],
            ),
            ("{schema_contract: strict}", ["`--vars schema_contract` is 'strict'", MODES]),
        ],
    )
    def test_bad_vars_fail_parse_for_every_model(self, project, vars_, parts):
        message = parse_error(["parse", "--vars", vars_])
        for name in ("evolving", "contracted"):
            line = line_of(message, name)
            for part in parts:
                assert part in line, (part, line)

    def test_good_vars_parse_again(self, project):
        # after a failed parse with other vars, the same project parses with good ones
        run_dbt(
            ["parse", "--vars", "{allow_full_refresh: true, schema_contract: {columns: evolve}}"]
        )


class TestProjectVarsAreRunVars:
    """`var()` reads dbt_project.yml `vars:` too: a bad value there fails the parse."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"vars": {"allow_column_removal": "sometimes"}}

    @pytest.fixture(scope="class")
    def models(self):
        return {"evolving.sql": INC % "schema_evolution={'strategy': 'alter_and_backfill'}"}

    def test_project_var_fails_parse(self, project):
        message = parse_error(["parse"])
        assert "`allow_column_removal` must be true or false, got 'sometimes'" in line_of(
            message, "evolving"
        )
        # --vars wins over the project's vars, as in `var()`
        run_dbt(["parse", "--vars", "{allow_column_removal: false}"])


class TestManyBadNodesAreCounted:
    """A bad --vars value fails every node: the message lists 20 of them and counts the rest."""

    @pytest.fixture(scope="class")
    def models(self):
        return {f"m{i:02d}.sql": INC % "on_schema_change='fail'" for i in range(23)}

    def test_listing_is_capped(self, project):
        lines = parse_error(["parse", "--vars", "{allow_full_refresh: maybe}"]).splitlines()
        listed = [line for line in lines if "`allow_full_refresh` must be true or false" in line]
        assert [line.strip().split(" ")[0] for line in listed] == [
            f"model.test.m{i:02d}" for i in range(20)
        ]
        assert lines[-1].strip() == "... and 3 more node(s)"


class TestAnIcebergMicrobatchModelRefusesNativeVariants:
    """Its batches replace their windows by a merge, which Iceberg 1.12 cannot plan over a new
    VARIANT column no file holds yet (test_native_variant.py shows the merge failing)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "variant_iceberg_microbatch.sql": INC
            % "file_format='iceberg', incremental_strategy='microbatch', event_time='ts', "
            "batch_size='day', begin='2020-01-01', schema_contract={'variant_columns': 'native'}"
        }

    def test_refused_at_parse_time(self, project):
        with pytest.raises(ParsingError) as info:
            run_dbt(["parse"])
        flat = " ".join(str(info.value).split())
        for fragment in (
            "models/variant_iceberg_microbatch.sql",
            "'native' on an Iceberg microbatch model",
            "Schema.findField",
            "variant_columns: typed",
        ):
            assert fragment in flat, flat
