{#-- dbt's `get_merge_sql`, for a caller with no planned run (a package's macro): a MERGE by name
     over the columns source and target share, rendered where every load is (core/materialization/load.py). A
     column the model no longer outputs keeps its value instead of failing `update set *`. --#}

{% macro spark_contracts__get_merge_sql(target, source, unique_key, dest_columns, incremental_predicates) %}
  {{ return(adapter.merge_sql(target, source, unique_key, incremental_predicates, {'merge_update_columns': config.get('merge_update_columns'), 'merge_exclude_columns': config.get('merge_exclude_columns')})) }}
{% endmacro %}
