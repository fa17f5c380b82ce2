{% materialization incremental, adapter='spark_contracts', supported_languages=['sql', 'python'] -%}
  {%- set file_format = dbt_spark_validate_get_file_format(spark_contracts_file_format()) -%}
  {%- set strategy = dbt_spark_validate_get_incremental_strategy(config.get('incremental_strategy') or adapter.default_incremental_strategy(file_format), file_format) -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set language = model['language'] -%}
  {%- set on_schema_change = incremental_validate_on_schema_change(config.get('on_schema_change'), default='ignore') -%}
  {%- set target_relation = this -%}
  {#-- step 1: what dead runs of the model left repaired, under its lease; planning then only reads --#}
  {%- set repaired = adapter.repair_model('incremental', this, load_relation(this), model, spark_contracts_run_vars(), should_full_refresh(), invocation_id) -%}
  {%- set existing_relation = repaired.relation -%}

  {{ run_hooks(pre_hooks) }}
  {#-- create, replace atomically, build beside and swap, drop then create, or evolve: the run
       planned against the deployed table, carried out --#}
  {%- set plan = spark_contracts_build('incremental', file_format, repaired, target_relation, existing_relation, strategy, language, compiled_code) -%}
  {%- if plan is none -%}
    {{ return({'relations': []}) }}
  {%- endif -%}

  {% set should_revoke = should_revoke(existing_relation, full_refresh_mode) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}
  {{ run_hooks(post_hooks) }}
  {#-- dbt caches the relation returned here: it carries its table format, which the next batch
       of a microbatch model (same invocation) reads from the cache --#}
  {{ return({'relations': [target_relation.incorporate(is_delta=plan.build.is_delta, is_iceberg=plan.build.is_iceberg)]}) }}
{%- endmaterialization %}
