{#-- Schema evolution in the incremental materialization. The adapter plans once (Python, core/)
     and hands back a typed run; these macros only pass it back, step by step. --#}

{% macro spark_contracts_run_vars() -%}
  {{ return(adapter.run_vars(var)) }}
{%- endmacro %}

{#-- Steps 2 and 3 of a table or incremental build, after its pre-hooks: the model's query (a
     Python model's view); where the relation does not exist yet, `tables` of a schema contract
     (none returned: not created); then the one question (core/materialization/run_plan.plan_model)
     and the plan carried out. Returns the plan. --#}
{% macro spark_contracts_build(materialization, file_format, repaired, target_relation, existing_relation, strategy, language, compiled_code) %}
  {%- set compiled_code = spark_contracts_model_sql(language, compiled_code) -%}
  {%- if existing_relation is none and not spark_contracts_may_create(target_relation, compiled_code) -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set plan = adapter.plan_model(materialization, file_format, repaired, target_relation, model, spark_contracts_run_vars(), should_full_refresh(), strategy, compiled_code, partition_cols(label="partitioned by"), invocation_id, adapter.data_tests_of(model, graph)) -%}
  {% do spark_contracts_execute(plan, target_relation, existing_relation, compiled_code) %}
  {{ return(plan) }}
{% endmacro %}

{#-- Step 3 of a table or incremental build: the plan (adapter.plan_model) carried out in one
     adapter call (adapter.execute_plan), which decides nothing here. Jinja renders only the
     table statement, with dbt-spark's DDL macros: the CTAS of the relation `plan.builds_at`
     names (the model's relation, or the table beside it that a swap puts in its place) from
     `plan.create_select`, or, for Iceberg's NOT NULL build, that SELECT and its clauses. --#}
{% macro spark_contracts_execute(plan, target_relation, existing_relation, compiled_code) %}
  {%- if config.get('contract').enforced -%}
    {{ get_assert_columns_equivalent(compiled_code) }}
  {%- endif -%}
  {%- set create_sql = none -%}
  {%- set clauses = '' -%}
  {%- if plan.create_select is not none -%}
    {%- if plan.explicit_build -%}
      {%- set create_sql = get_select_subquery(plan.create_select) if config.get('contract').enforced else plan.create_select -%}
      {%- set clauses -%}
        {{ options_clause() }} {{ partition_cols(label="partitioned by") }} {{ clustered_cols(label="clustered by") }} {{ location_clause() }} {{ comment_clause() }} {{ plan.constraints.tblproperties_clause(config.get('tblproperties')) }}
      {%- endset -%}
    {%- else -%}
      {%- set create_sql = spark_contracts_ctas(plan.builds_at(target_relation), plan.create_select, plan.constraints, assert_columns=false) -%}
    {%- endif -%}
    {% do write(create_sql) %}
  {%- endif -%}
  {% do store_result('main', response=adapter.execute_plan(plan, target_relation, existing_relation, create_sql, clauses | trim)) %}
{% endmacro %}

{#-- The schema contract before a relation is created (`tables`), or a view `existing` replaced
     (its `freeze` modes): true = go on. `sql`: the model's query when it is not the context's
     (a Python model's view). --#}
{% macro spark_contracts_may_create(relation, sql=none, existing=none) %}
  {%- set compiled_code = sql if sql is not none else compiled_code -%}
  {%- set action = adapter.contract_before_create(relation, existing, compiled_code, model, spark_contracts_run_vars()) -%}
  {%- if action == 'skip' -%}
    {% do store_result('main', response=adapter.skipped_response(model)) %}
  {%- endif -%}
  {{ return(action == 'create') }}
{% endmacro %}

{#-- A Python model runs here, in the dbt process, on the thread's SparkSession; its DataFrame
     becomes a temporary view and the materialization goes on with `select * from <view>`. --#}
{% macro spark_contracts_model_sql(language, compiled_code) %}
  {%- if language == 'python' -%}
    {{ return('select * from ' ~ adapter.python_model_view(compiled_code, model)) }}
  {%- endif -%}
  {{ return(compiled_code) }}
{% endmacro %}
