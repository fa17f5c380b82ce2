{#-- dbt's enforced contract, compared by the adapter on typed schemas (nested field by field,
     ignoring size/precision/scale); called on first builds and on every incremental run. --#}
{% macro spark_contracts__get_assert_columns_equivalent(sql) -%}
  {%- if not model['columns'] -%}
    {{ exceptions.raise_contract_error([], []) }}
  {%- endif -%}
  {%- do adapter.assert_model_contract(sql, get_empty_schema_sql(model['columns']), model) -%}
{%- endmacro %}
