{% materialization table, adapter='spark_contracts', supported_languages=['sql', 'python'] %}
  {%- set language = model['language'] -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set file_format = spark_contracts_file_format() -%}
  {%- set old_relation = adapter.get_relation(database=database, schema=schema, identifier=model['alias']) -%}
  {%- set target_relation = this.incorporate(type='table') -%}

  {{ run_hooks(pre_hooks) }}

  {%- if old_relation is none and language == 'sql' and not spark_contracts_may_create(target_relation) -%}
    {{ return({'relations': []}) }}
  {%- endif -%}

  {#-- Delta and Iceberg replace atomically (`create or replace`); anything else is dropped first. --#}
  {%- set replaceable = old_relation is not none and old_relation.is_table and (
        (old_relation.is_delta and file_format == 'delta') or
        (old_relation.is_iceberg and file_format == 'iceberg')) -%}
  {% if old_relation is not none and not replaceable %}
    {{ adapter.drop_relation(old_relation) }}
  {% endif %}

  {% do spark_contracts_create_main(target_relation, compiled_code, language) %}

  {% set should_revoke = should_revoke(old_relation, full_refresh_mode=True) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}
  {% do persist_constraints(target_relation, model) %}

  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
