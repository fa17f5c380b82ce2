{#-- `dbt run-operation demo_schema --args '{model: orders_evolving_schema}'`: a model's columns. --#}
{% macro demo_schema(model) %}
  {%- set relation = adapter.get_relation(database=none, schema=target.schema, identifier=model) -%}
  {%- for column in adapter.get_columns_in_relation(relation) %}
  {{ print("    " ~ column.name ~ ": " ~ column.data_type) }}
  {%- endfor %}
{% endmacro %}
