{% materialization incremental, adapter='spark_contracts', supported_languages=['sql', 'python'] -%}
  {%- set file_format = dbt_spark_validate_get_file_format(spark_contracts_file_format()) -%}
  {%- set strategy = dbt_spark_validate_get_incremental_strategy(config.get('incremental_strategy') or adapter.default_incremental_strategy(file_format), file_format) -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set unique_key = config.get('unique_key', none) -%}
  {%- set partition_by = config.get('partition_by', none) -%}
  {%- set language = model['language'] -%}
  {%- set on_schema_change = incremental_validate_on_schema_change(config.get('on_schema_change'), default='ignore') -%}
  {%- set incremental_predicates = config.get('predicates', none) or config.get('incremental_predicates', none) -%}
  {%- set target_relation = this -%}
  {%- set existing_relation = load_relation(this) or adapter.recover_rewrite(this) -%}
  {#-- a temporary view, for SQL and Python models alike (a Python model is read as SQL) --#}
  {%- set tmp_relation = this.incorporate(path={"identifier": this.identifier ~ '__dbt_tmp'}).include(database=false, schema=false) -%}

  {%- if strategy in ['insert_overwrite', 'microbatch'] and partition_by -%}
    {%- call statement() -%}
      set spark.sql.sources.partitionOverwriteMode = DYNAMIC
    {%- endcall -%}
  {%- endif -%}

  {{ run_hooks(pre_hooks) }}
  {%- set compiled_code = spark_contracts_model_sql(language, compiled_code) -%}
  {%- set language = 'sql' -%}

  {%- if existing_relation is none and not spark_contracts_may_create(target_relation, compiled_code) -%}
    {{ return({'relations': []}) }}
  {%- endif -%}

  {#-- one decision (core/run_plan.py): create, replace atomically, drop then create, or evolve --#}
  {%- set build = adapter.plan_build('incremental', file_format, existing_relation, model, spark_contracts_run_vars(), should_full_refresh(), strategy) -%}
  {%- if build.evolves -%}
    {%- call statement('create_tmp_relation', language=language) -%}
      {{ create_table_as(True, tmp_relation, compiled_code, language) }}
    {%- endcall -%}
    {{ spark_contracts_evolve_and_load(build.load_strategy, tmp_relation, target_relation, existing_relation, unique_key, incremental_predicates, file_format, compiled_code) }}
  {%- else -%}
    {% if build.drop_first %}
      {% do adapter.drop_relation(existing_relation) %}
    {% endif %}
    {% do spark_contracts_create_main(target_relation, spark_contracts_create_sql(target_relation, language, compiled_code), language) %}
  {%- endif -%}

  {% set should_revoke = should_revoke(existing_relation, full_refresh_mode) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}
  {{ run_hooks(post_hooks) }}
  {#-- dbt caches the relation returned here: it carries its table format, which the next batch
       of a microbatch model (same invocation) reads from the cache --#}
  {{ return({'relations': [target_relation.incorporate(is_delta=build.is_delta, is_iceberg=build.is_iceberg)]}) }}
{%- endmaterialization %}
