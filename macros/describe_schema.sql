{#-- dbt run-operation describe_schema --args '{relation: analytics.orders}'
     Prints the table's format, typed schema (full nested types, nullability) and properties:
     what the schema-evolution planner sees as the deployed side. --#}
{% macro describe_schema(relation) %}
  {% do log(adapter.describe_deployed_schema(relation), info=true) %}
{% endmacro %}
