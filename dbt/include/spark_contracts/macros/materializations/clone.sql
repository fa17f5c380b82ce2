{#-- dbt clone: a Delta shallow clone of a Delta source table, else a view over the source (dbt's
     default clone). dbt-spark's own clone requires `file_format: delta` in the node's config (the
     adapter default does not count) and replaces a non-empty clone target, which Delta refuses
     (DELTA_UNSUPPORTED_NON_EMPTY_CLONE); the decision is core/materialization/clone.py's, the SQL dbt-spark's
     (spark__create_or_replace_clone) and dbt's (view materialization). --#}
{%- materialization clone, adapter='spark_contracts' -%}

  {%- if not defer_relation -%}
      {{ log("No relation found in state manifest for " ~ model.unique_id, info=True) }}
      {{ return({'relations': []}) }}
  {%- endif -%}

  {%- set existing_relation = load_cached_relation(this) -%}
  {%- set source_relation = load_cached_relation(defer_relation) -%}
  {%- set plan = adapter.plan_clone(this, existing_relation, defer_relation, source_relation,
                                    can_clone_table(), flags.FULL_REFRESH) -%}

  {%- if plan.no_op -%}
      {{ log("Relation " ~ existing_relation ~ " already exists", info=True) }}
      {{ return({'relations': []}) }}
  {%- elif plan.same_relation -%}
      {{ log("Target relation and defer relation are the same, skipping clone for relation: " ~ this.render()) }}
      {{ return({'relations': []}) }}
  {%- elif plan.as_view -%}
      {{ log("Cloning " ~ defer_relation ~ " as a view: " ~ plan.reason) }}
      {{ return(context["materialization_view_" ~ adapter.type()]()) }}
  {%- endif -%}

  {%- set target_relation = this.incorporate(type='table') -%}
  {%- if plan.drop_target -%}
      {{ drop_relation_if_exists(existing_relation) }}
  {%- endif -%}
  {% call statement('main') %}
      {{ create_or_replace_clone(target_relation, defer_relation) }}
  {% endcall %}

  {% set should_revoke = should_revoke(existing_relation, full_refresh_mode=True) %}
  {% do apply_grants(target_relation, config.get('grants'), should_revoke=should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ return({'relations': [target_relation]}) }}

{%- endmaterialization -%}
