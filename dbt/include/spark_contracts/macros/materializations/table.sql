{% materialization table, adapter='spark_contracts', supported_languages=['sql', 'python'] %}
  {%- set language = model['language'] -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set file_format = spark_contracts_file_format() -%}
  {#-- step 1: what dead runs of the model left repaired, under its lease; planning then only reads --#}
  {%- set repaired = adapter.repair_model('table', this, adapter.get_relation(database=database, schema=schema, identifier=model['alias']), model, spark_contracts_run_vars(), should_full_refresh(), invocation_id) -%}
  {%- set old_relation = repaired.relation -%}
  {%- set target_relation = this.incorporate(type='table') -%}

  {{ run_hooks(pre_hooks) }}
  {%- set compiled_code = spark_contracts_model_sql(language, compiled_code) -%}
  {%- set language = 'sql' -%}

  {%- if old_relation is none and not spark_contracts_may_create(target_relation, compiled_code) -%}
    {{ return({'relations': []}) }}
  {%- endif -%}

  {#-- one question (core/materialization/run_plan.plan_model): create, replace atomically, build beside and swap,
       drop then create, or,
       for a table that exists and binds a schema contract or schema_evolution, a rebuild
       planned against it like an incremental run (contract modes, gated drops/narrowing) --#}
  {%- set plan = adapter.plan_model('table', file_format, repaired, target_relation, model, spark_contracts_run_vars(), should_full_refresh(), '', compiled_code, partition_cols(label="partitioned by"), invocation_id) -%}
  {% do spark_contracts_execute(plan, target_relation, old_relation, compiled_code) %}

  {% set should_revoke = should_revoke(old_relation, full_refresh_mode=True) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
