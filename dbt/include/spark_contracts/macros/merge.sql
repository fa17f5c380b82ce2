{#-- MERGE by name over the columns source and target share: a column the model no longer
     outputs (on_schema_change: append_new_columns / ignore) keeps its value, instead of
     failing `update set *`. With a planned run the column lists come from the run (no DESCRIBE),
     and a run whose changes ride in the write merges WITH SCHEMA EVOLUTION (`*` actions). --#}

{% macro spark_contracts__get_merge_sql(target, source, unique_key, dest_columns, incremental_predicates, run=none) %}
  {%- set predicates = [] if incremental_predicates is none else [] + incremental_predicates -%}
  {%- if run is none -%}
    {%- set columns = adapter.merge_columns(source, target, config.get('merge_update_columns'), config.get('merge_exclude_columns')) -%}
  {%- else -%}
    {%- set columns = run.merge_columns(config.get('merge_update_columns'), config.get('merge_exclude_columns')) -%}
  {%- endif -%}
  {%- set keys = [] if not unique_key else ([unique_key] if unique_key is string else unique_key) -%}
  {%- for key in keys %}
    {%- do predicates.append('DBT_INTERNAL_SOURCE.' ~ key ~ ' = DBT_INTERNAL_DEST.' ~ key) -%}
  {%- endfor %}
  {%- if not keys %}{% do predicates.append('FALSE') %}{% endif %}

  {{ sql_header if sql_header is not none }}

  {%- if run is not none and run.evolves_in_write %}
  merge with schema evolution into {{ target }} as DBT_INTERNAL_DEST
      using {{ source }} as DBT_INTERNAL_SOURCE
      on {{ predicates | join(' and ') }}
      when matched then update set *
      when not matched then insert *
  {%- else %}
  merge into {{ target }} as DBT_INTERNAL_DEST
      using {{ source }} as DBT_INTERNAL_SOURCE
      on {{ predicates | join(' and ') }}
  {%- if columns['update'] %}
      when matched then update set
        {%- for column in columns['update'] %}
          DBT_INTERNAL_DEST.{{ column }} = DBT_INTERNAL_SOURCE.{{ column }}{{ "," if not loop.last }}
        {%- endfor %}
  {%- endif %}
      when not matched then insert ({{ columns['insert'] | join(', ') }})
        values ({% for column in columns['insert'] %}DBT_INTERNAL_SOURCE.{{ column }}{{ ", " if not loop.last }}{% endfor %})
  {%- endif %}
{% endmacro %}
