{#-- Schema evolution in the incremental materialization. The adapter plans (Python, core/);
     these macros only run what they are handed, in order. --#}

{% macro spark_contracts_run_vars() -%}
  {{ return({
      'allow_full_refresh': var('allow_full_refresh', false),
      'allow_column_removal': var('allow_column_removal', false),
      'schema_evolution_dry_run': var('schema_evolution_dry_run', false),
      'schema_contract': var('schema_contract', none),
  }) }}
{%- endmacro %}

{% macro spark_contracts_evolve_and_load(strategy, tmp_relation, target_relation, existing_relation, unique_key, incremental_predicates, file_format) %}
  {%- if config.get('contract').enforced -%}
    {{ get_assert_columns_equivalent(compiled_code) }}
  {%- endif -%}
  {%- set evolution = adapter.plan_schema_evolution(
        existing_relation, compiled_code, model, spark_contracts_run_vars(),
        partition_cols(label="partitioned by")) -%}
  {%- if evolution.blocked -%}
    {{ exceptions.raise_compiler_error(evolution.error_message) }}
  {%- elif evolution.dry_run -%}
    {{ log("[dry run] " ~ evolution.summary(), info=true) }}
    {% do store_result('main', response=adapter.dry_run_response(evolution)) %}
  {%- elif evolution.full_refresh -%}
    {%- if not ((file_format == 'delta' and existing_relation.is_delta) or (file_format == 'iceberg' and existing_relation.is_iceberg)) -%}
      {% do adapter.drop_relation(existing_relation) %}
    {%- endif -%}
    {%- call statement('main') -%}
      {{ create_table_as(False, target_relation, compiled_code, 'sql') }}
    {%- endcall -%}
    {% do store_result('main', response=adapter.evolution_response(evolution, load_result('main').response)) %}
    {% do persist_constraints(target_relation, model) %}
  {%- else -%}
    {% do adapter.apply_schema_evolution(evolution, tmp_relation) %}
    {%- set source = adapter.contract_source(evolution, tmp_relation, invocation_id) -%}
    {%- set load_sql = dbt_spark_get_incremental_sql(strategy, source, target_relation, existing_relation, unique_key, incremental_predicates) -%}
    {% do store_result('main', response=adapter.load_with_restore(evolution, load_sql, tmp_relation)) %}
  {%- endif -%}
{% endmacro %}

{#-- `tables` of a schema contract, when the relation does not exist yet: true = create it. --#}
{% macro spark_contracts_may_create(relation) %}
  {%- set action = adapter.contract_new_table_action(relation, compiled_code, model, spark_contracts_run_vars()) -%}
  {%- if action == 'skip' -%}
    {% do store_result('main', response=adapter.skipped_response(model)) %}
  {%- endif -%}
  {{ return(action == 'create') }}
{% endmacro %}
