{#-- dbt-spark's view, behind the schema contract: `tables` decides whether a new view is created,
     and a view that exists keeps its columns (and types) under `freeze`. --#}
{% materialization view, adapter='spark_contracts' -%}
  {%- set existing = adapter.get_relation(database=database, schema=schema, identifier=model['alias']) -%}
  {%- if existing is none -%}
    {%- if not spark_contracts_may_create(this.incorporate(type='view')) -%}
      {{ return({'relations': []}) }}
    {%- endif -%}
  {%- elif existing.is_view -%}
    {%- do adapter.check_view_contract(existing, compiled_code, model, spark_contracts_run_vars()) -%}
  {%- endif -%}
  {{ return(create_or_replace_view()) }}
{%- endmaterialization %}
