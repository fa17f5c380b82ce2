{#-- Delta is the default table format: every place dbt-spark reads `file_format` reads it here. --#}

{% macro spark_contracts_file_format() -%}
  {{ return(config.get('file_format', validator=validation.any[basestring]) or adapter.default_file_format()) }}
{%- endmacro %}

{% macro spark_contracts__file_format_clause() %}
  using {{ spark_contracts_file_format() }}
{%- endmacro -%}

{%- macro spark_contracts__create_table_as(temporary, relation, compiled_code, language='sql') -%}
  {%- if language == 'sql' and not temporary -%}
    {%- set file_format = spark_contracts_file_format() -%}
    {% if file_format in ['delta', 'iceberg'] %}
      create or replace table {{ relation }}
    {% else %}
      create table {{ relation }}
    {% endif %}
    {%- set contract_config = config.get('contract') -%}
    {%- if contract_config.enforced -%}
      {{ get_assert_columns_equivalent(compiled_code) }}
      {%- set compiled_code = get_select_subquery(compiled_code) %}
    {% endif %}
    {{ file_format_clause() }}
    {{ options_clause() }}
    {{ tblproperties_clause() }}
    {{ partition_cols(label="partitioned by") }}
    {{ clustered_cols(label="clustered by") }}
    {{ location_clause() }}
    {{ comment_clause() }}
    as
    {{ compiled_code }}
  {%- else -%}
    {{ spark__create_table_as(temporary, relation, compiled_code, language) }}
  {%- endif -%}
{%- endmacro -%}

{% macro spark_contracts__alter_column_comment(relation, column_dict) %}
  {% if spark_contracts_file_format() in ['delta', 'iceberg'] %}
    {% for column_name in column_dict %}
      {% set escaped_comment = column_dict[column_name]['description'] | replace('\'', '\\\'') %}
      {% set quoted = adapter.quote(column_name) if column_dict[column_name]['quote'] else column_name %}
      {% do run_query("alter table " ~ relation ~ " alter column " ~ quoted ~ " comment '" ~ escaped_comment ~ "'") %}
    {% endfor %}
  {% endif %}
{% endmacro %}

{% macro spark_contracts__persist_constraints(relation, model) %}
  {%- set contract_config = config.get('contract') -%}
  {% if contract_config.enforced and spark_contracts_file_format() == 'delta' %}
    {% do alter_table_add_constraints(relation, model.constraints) %}
    {% do alter_column_set_constraints(relation, model.columns) %}
  {% endif %}
{% endmacro %}
