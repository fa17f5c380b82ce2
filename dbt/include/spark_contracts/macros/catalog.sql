{#-- Catalogs: on Spark, dbt's `database` is a catalog. spark_catalog (Delta) renders as no
     database; a configured catalog (Iceberg) renders as `catalog.schema.table`. --#}

{% macro spark_contracts__generate_database_name(custom_database_name=none, node=none) -%}
  {%- set file_format = node.config.get('file_format') if node is not none else none -%}
  {{ return(adapter.resolve_catalog(custom_database_name, file_format)) }}
{%- endmacro %}

{% macro spark_contracts__list_schemas(database) -%}
  {% call statement('list_schemas', fetch_result=True, auto_begin=False) %}
    show namespaces {% if database %}in {{ database }}{% endif %}
  {% endcall %}
  {{ return(load_result('list_schemas').table) }}
{% endmacro %}

{% macro spark_contracts__list_catalog_tables(schema_relation) -%}
  {% call statement('list_catalog_tables', fetch_result=True) -%}
    show tables in {{ schema_relation.database }}.{{ schema_relation.schema }}
  {% endcall %}
  {% do return(load_result('list_catalog_tables').table) %}
{% endmacro %}

{% macro spark_contracts__create_schema(relation) -%}
  {%- call statement('create_schema') -%}
    create schema if not exists {{ relation.without_identifier() }}
  {% endcall %}
{% endmacro %}

{% macro spark_contracts__drop_schema(relation) -%}
  {%- call statement('drop_schema') -%}
    drop schema if exists {{ relation.without_identifier() }} cascade
  {%- endcall -%}
{% endmacro %}
