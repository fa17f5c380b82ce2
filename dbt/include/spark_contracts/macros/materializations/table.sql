{% materialization table, adapter='spark_contracts', supported_languages=['sql', 'python'] %}
  {%- set language = model['language'] -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set file_format = spark_contracts_file_format() -%}
  {#-- step 1: what dead runs of the model left repaired, under its lease; planning then only reads --#}
  {%- set repaired = adapter.repair_model('table', this, adapter.get_relation(database=database, schema=schema, identifier=model['alias']), model, spark_contracts_run_vars(), should_full_refresh(), invocation_id) -%}
  {%- set old_relation = repaired.relation -%}
  {%- set target_relation = this.incorporate(type='table') -%}

  {{ run_hooks(pre_hooks) }}
  {#-- create, replace atomically, build beside and swap, drop then create, or, for a table that
       exists and binds a schema contract or schema_evolution, a rebuild planned against it
       like an incremental run (contract modes, gated drops/narrowing) --#}
  {%- set plan = spark_contracts_build('table', file_format, repaired, target_relation, old_relation, '', language, compiled_code) -%}
  {%- if plan is none -%}
    {{ return({'relations': []}) }}
  {%- endif -%}

  {% set should_revoke = should_revoke(old_relation, full_refresh_mode=True) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
