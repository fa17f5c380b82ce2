{#-- dbt run-operation restore_table --args '{relation: analytics.orders, version: 3}'
     Puts a Delta table back to an earlier version (schema and rows), e.g. after a bad deploy.
     `DESCRIBE HISTORY <relation>` lists the versions. --#}
{% macro restore_table(relation, version) %}
  {% if version is not number %}
    {{ exceptions.raise_compiler_error("restore_table: `version` must be a Delta table version number, got " ~ version) }}
  {% endif %}
  {% do run_query("restore table " ~ relation ~ " to version as of " ~ version) %}
  {% do log("restored " ~ relation ~ " to version " ~ version, info=true) %}
{% endmacro %}
