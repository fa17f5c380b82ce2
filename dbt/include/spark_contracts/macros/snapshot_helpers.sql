{#-- dbt's snapshot staging (hard_deletes: new_record) reads the snapshot's columns through
     `get_list_of_column_names(get_columns_in_relation(target))`, which takes column objects
     (`.name`). dbt-spark's macro returns DESCRIBE's raw rows instead, so no column matched and
     a deletion record carried NULL in every source column. The adapter's parsed columns. --#}
{% macro spark_contracts__get_columns_in_relation(relation) -%}
  {{ return(adapter.get_columns_in_relation(relation)) }}
{%- endmacro %}
