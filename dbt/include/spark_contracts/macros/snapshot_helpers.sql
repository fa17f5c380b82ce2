{#-- dbt's snapshot staging (hard_deletes: new_record) reads the snapshot's columns through
     `get_list_of_column_names(get_columns_in_relation(target))`, which takes column objects
     (`.name`). dbt-spark's macro returns DESCRIBE's raw rows instead, so no column matched and
     a deletion record carried NULL in every source column. The adapter's parsed columns. --#}
{% macro spark_contracts__get_columns_in_relation(relation) -%}
  {{ return(adapter.get_columns_in_relation(relation)) }}
{%- endmacro %}


{#-- A query's column names by analysis (the query does not run). dbt's default runs it with
     `where false limit 0` and reads the result's description, which Spark's Thrift server
     cannot give for a VARIANT column: a check snapshot of a model with one failed over thrift. --#}
{% macro spark_contracts__get_columns_in_query(select_sql) -%}
  {{ return(adapter.columns_in_query(select_sql)) }}
{%- endmacro %}


{#-- dbt-spark's snapshot merge, inserting the columns the snapshot table has (`insert_cols`,
     the planned run's `merge_columns`) by name instead of `insert *`. The staging relation also
     carries dbt's merge helpers (dbt_change_type, dbt_unique_key, dbt_unique_key_1, ...):
     under Delta schema auto-merge (`spark.databricks.delta.schema.autoMerge.enabled`, a common
     profile setting) `insert *` added them to the snapshot table, and the next run's
     `select *, <key> as dbt_unique_key_1` was ambiguous. --#}
{% macro spark_contracts__snapshot_merge_sql(target, source, insert_cols) -%}
    {%- set columns = config.get("snapshot_table_column_names") or get_snapshot_table_column_names() -%}
    {%- set valid_to_current = config.get("dbt_valid_to_current") -%}

    merge into {{ target }} as DBT_INTERNAL_DEST
    {# `source`: the staging view, temporary: no catalog, no schema #}
    using {{ source }} as DBT_INTERNAL_SOURCE
    on DBT_INTERNAL_SOURCE.{{ columns.dbt_scd_id }} = DBT_INTERNAL_DEST.{{ columns.dbt_scd_id }}
    when matched
     {% if valid_to_current %}
       and ( DBT_INTERNAL_DEST.{{ columns.dbt_valid_to }} = {{ valid_to_current }} or
             DBT_INTERNAL_DEST.{{ columns.dbt_valid_to }} is null )
     {% else %}
       and DBT_INTERNAL_DEST.{{ columns.dbt_valid_to }} is null
     {% endif %}
     and DBT_INTERNAL_SOURCE.dbt_change_type in ('update', 'delete')
        then update
        set {{ columns.dbt_valid_to }} = DBT_INTERNAL_SOURCE.{{ columns.dbt_valid_to }}

    when not matched
     and DBT_INTERNAL_SOURCE.dbt_change_type = 'insert'
        then insert ({{ insert_cols | join(', ') }})
        values ({% for column in insert_cols %}DBT_INTERNAL_SOURCE.{{ column }}{{ ", " if not loop.last }}{% endfor %})
{% endmacro %}


{#-- dbt's check strategy, with one change: a VARIANT column (a native variant column
     `<col>__v`, see docs/contracts.md) is compared through `to_json`, since Spark cannot
     compare VARIANT values (`!=` on one fails with INVALID_ORDERING_TYPE). Other columns are
     compared as dbt does. --#}
{% macro snapshot_check_strategy(node, snapshotted_rel, current_rel, model_config, target_exists) %}
    {% set check_cols_config = config.get('check_cols') %}
    {% set primary_key = config.get('unique_key') %}
    {% set hard_deletes = adapter.get_hard_deletes_behavior(config) %}
    {% set invalidate_hard_deletes = hard_deletes == 'invalidate' %}
    {% set updated_at = config.get('updated_at') or snapshot_get_time() %}

    {% set column_added, check_cols = snapshot_check_all_get_existing_columns(node, target_exists, check_cols_config) %}

    {%- set variants = [] -%}
    {%- if target_exists -%}
      {%- set target_relation = adapter.get_relation(database=node.database, schema=node.schema, identifier=node.alias) -%}
      {%- for column in adapter.get_columns_in_relation(target_relation) -%}
        {%- if column.dtype | lower == 'variant' -%}
          {%- do variants.append(adapter.quote(column.name) | lower) -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endif -%}

    {%- set row_changed_expr -%}
    (
    {%- if column_added -%}
        {{ get_true_sql() }}
    {%- else -%}
    {%- for col in check_cols -%}
        {%- if col | lower in variants -%}
          {%- set old = 'to_json(' ~ snapshotted_rel ~ '.' ~ col ~ ')' -%}
          {%- set new = 'to_json(' ~ current_rel ~ '.' ~ col ~ ')' -%}
        {%- else -%}
          {%- set old = snapshotted_rel ~ '.' ~ col -%}
          {%- set new = current_rel ~ '.' ~ col -%}
        {%- endif -%}
        {{ old }} != {{ new }}
        or
        (
            (({{ old }} is null) and not ({{ new }} is null))
            or
            ((not {{ old }} is null) and ({{ new }} is null))
        )
        {%- if not loop.last %} or {% endif -%}
    {%- endfor -%}
    {%- endif -%}
    )
    {%- endset %}

    {% set scd_args = api.Relation.scd_args(primary_key, updated_at) %}
    {% set scd_id_expr = snapshot_hash_arguments(scd_args) %}

    {% do return({
        "unique_key": primary_key,
        "updated_at": updated_at,
        "row_changed": row_changed_expr,
        "scd_id": scd_id_expr,
        "invalidate_hard_deletes": invalidate_hard_deletes,
        "hard_deletes": hard_deletes
    }) %}
{% endmacro %}
