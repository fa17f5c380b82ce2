{#-- dbt-spark's view, behind the schema contract: `tables` decides whether a new view is created,
     and a view that exists keeps its columns (and types) under `freeze`. --#}
{% materialization view, adapter='spark_contracts' -%}
  {%- set existing = adapter.get_relation(database=database, schema=schema, identifier=model['alias']) -%}
  {%- if (existing is none or existing.is_view) and not spark_contracts_may_create(this.incorporate(type='view'), existing=existing) -%}
    {{ return({'relations': []}) }}
  {%- endif -%}
  {{ return(create_or_replace_view()) }}
{%- endmaterialization %}
