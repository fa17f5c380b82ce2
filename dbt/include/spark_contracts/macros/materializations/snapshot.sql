{#-- dbt-spark's snapshot, with Delta as the default format and the model's catalog kept. --#}
{% materialization snapshot, adapter='spark_contracts' %}

  {%- set target_table = model.get('alias', model.get('name')) -%}

  {%- set strategy_name = config.get('strategy') -%}
  {%- set unique_key = config.get('unique_key') %}
  {%- set file_format = spark_contracts_file_format() -%}
  {%- set grant_config = config.get('grants') -%}

  {% set target_relation_exists, target_relation = get_or_create_relation(
          database=this.database,
          schema=model.schema,
          identifier=target_table,
          type='table') -%}

  {%- if file_format not in ['delta', 'iceberg', 'hudi'] -%}
    {% set invalid_format_msg -%}
      Invalid file format: {{ file_format }}
      Snapshot functionality requires file_format be set to 'delta' or 'iceberg' or 'hudi'
    {%- endset %}
    {% do exceptions.raise_compiler_error(invalid_format_msg) %}
  {% endif %}

  {%- if target_relation_exists -%}
    {%- if not target_relation.is_delta and not target_relation.is_iceberg and not target_relation.is_hudi -%}
      {% set invalid_format_msg -%}
        The existing table {{ model.schema }}.{{ target_table }} is in another format than 'delta' or 'iceberg' or 'hudi'
      {%- endset %}
      {% do exceptions.raise_compiler_error(invalid_format_msg) %}
    {% endif %}
  {% endif %}

  {% if not adapter.check_schema_exists(this.database, model.schema) %}
    {% do create_schema(api.Relation.create(database=this.database, schema=model.schema)) %}
  {% endif %}

  {%- if not target_relation.is_table -%}
    {% do exceptions.relation_wrong_type(target_relation, 'table') %}
  {%- endif -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}

  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {#-- step 1: what a dead run of the snapshot left repaired, under its lease; what exists is
       read from it (a relation a dead run's rename left aside is put back first) --#}
  {%- set repaired = adapter.repair_model('snapshot', this, target_relation if target_relation_exists else none, model, spark_contracts_run_vars(), false, invocation_id) -%}
  {%- set existing = repaired.relation -%}
  {%- set target_relation_exists = existing is not none -%}
  {#-- `tables` of the schema contract decides whether the first run creates the snapshot --#}
  {%- if not target_relation_exists and not spark_contracts_may_create(target_relation) -%}
    {{ return({'relations': []}) }}
  {%- endif -%}

  {#-- dbt's check strategy reads node.database, absent when the catalog is spark_catalog --#}
  {% if 'database' not in model %}{% do model.update({'database': this.database}) %}{% endif %}
  {% set strategy_macro = strategy_dispatch(strategy_name) %}
  {% set strategy = strategy_macro(model, "snapshotted_data", "source_data", model['config'], target_relation_exists) %}

  {% if not target_relation_exists %}
      {% set query = build_snapshot_table(strategy, model['compiled_code']) %}
  {% else %}
      {% set columns = config.get("snapshot_table_column_names") or get_snapshot_table_column_names() %}
      {{ adapter.valid_snapshot_target(target_relation, columns) }}
      {% set staging_table = spark_contracts_snapshot_staging_view(strategy, sql, target_relation, file_format) %}
      {% set query = 'select * from ' ~ staging_table %}
  {% endif %}

  {#-- step 2: planned once against the snapshot table (its schema contract, the source's new
       columns and widened types); step 3: carried out by the one executor, dbt's merge its
       load, the schema change before it under the run's record, taken back with it --#}
  {%- set plan = adapter.plan_model('snapshot', file_format, repaired, target_relation, model, spark_contracts_run_vars(), false, 'snapshot', query, '', invocation_id) -%}
  {#-- no merge where the plan loads nothing (blocked, a dry run): none is written to target/run --#}
  {% if not target_relation_exists %}
      {% set final_sql = create_table_as(False, target_relation, query) %}
  {% elif plan.merge_columns %}
      {% set final_sql = snapshot_merge_sql(target=target_relation, source=staging_table, insert_cols=plan.merge_columns) %}
  {% else %}
      {% set final_sql = '' %}
  {% endif %}
  {% if final_sql %}{% do write(final_sql) %}{% endif %}
  {% do store_result('main', response=adapter.execute_plan(plan, target_relation, existing, final_sql)) %}

  {% set should_revoke = should_revoke(target_relation_exists, full_refresh_mode) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}

  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks, inside_transaction=True) }}

  {{ adapter.commit() }}

  {% if staging_table is defined %}
      {% do post_snapshot(staging_table) %}
  {% endif %}

  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target_relation]}) }}

{% endmaterialization %}


{#-- dbt's staging SELECT (the snapshot's rows to insert, update and close) as a temporary view of
     the dbt thread's session, where dbt-spark makes a persistent one (a temporary function or view
     the snapshot reads is refused there, INVALID_TEMP_OBJ_REFERENCE; an Iceberg snapshot's lands
     in the default database). The plan reads its schema from a temporary view over it. The
     snapshot's query is read as `staging_query` says (once per statement where the format's
     MERGE allows; elsewhere through a temporary view of it, which the executor points at the
     query's rows written once before the merge); from `adapter.snapshot_staging`
     (relation.SnapshotStaging). --#}
{% macro spark_contracts_snapshot_staging_view(strategy, sql, target_relation, file_format) %}
  {%- set staging = adapter.snapshot_staging(target_relation, sql) -%}
  {% if staging.source is not none %}
    {% call statement('build_snapshot_source_view') %}
      create or replace temporary view {{ staging.source }} as
      {{ sql }}
    {% endcall %}
  {% endif %}
  {% call statement('build_snapshot_staging_relation') %}
    {{ create_table_as(true, staging.relation, snapshot_staging_table(strategy, staging.query, target_relation)) }}
  {% endcall %}
  {{ return(staging.relation) }}
{% endmacro %}
