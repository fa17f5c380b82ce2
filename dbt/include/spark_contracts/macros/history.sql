{#-- `dbt run-operation schema_history --args '{model: orders}'`: what changed in a model's
     table, run by run (applied changes, discards, repairs), from the schema's history table. --#}
{% macro schema_history(model, limit=200) %}
  {%- set found = graph.nodes.values() | selectattr('resource_type', 'equalto', 'model')
                  | selectattr('name', 'equalto', model) | list -%}
  {%- if not found -%}
    {{ exceptions.raise_compiler_error("schema_history: no model named '" ~ model ~ "' in this project") }}
  {%- endif -%}
  {%- set rows = adapter.schema_history(found[0].unique_id, found[0].relation_name) -%}
  {{ print(found[0].unique_id ~ " (" ~ found[0].relation_name ~ "): " ~ (rows.rows | length) ~ " history rows") }}
  {{ print(rows.column_names | join(' | ')) }}
  {%- for row in rows.rows[:limit] %}
  {{ print(row.values() | map('string') | join(' | ')) }}
  {%- endfor %}
{% endmacro %}
