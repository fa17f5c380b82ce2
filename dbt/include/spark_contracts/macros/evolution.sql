{#-- Schema evolution in the incremental materialization. The adapter plans once (Python, core/)
     and hands back a typed run; these macros only pass it back, step by step. --#}

{% macro spark_contracts_run_vars() -%}
  {{ return(adapter.run_vars(var)) }}
{%- endmacro %}

{#-- An evolving build carries out its planned run (adapter.plan_model): blocked, a dry run, a
     full refresh, or the run's statements and its one load in one adapter call. --#}
{% macro spark_contracts_evolve_and_load(run, target_relation, existing_relation, sql=none) %}
  {%- set compiled_code = sql if sql is not none else compiled_code -%}
  {%- if config.get('contract').enforced -%}
    {{ get_assert_columns_equivalent(compiled_code) }}
  {%- endif -%}
  {%- if run.blocked -%}
    {{ exceptions.raise_compiler_error(adapter.blocked_run(run)) }}
  {%- elif run.dry_run -%}
    {{ log("[dry run] " ~ run.summary(), info=true) }}
    {% do store_result('main', response=adapter.dry_run_response(run)) %}
  {%- elif run.full_refresh -%}
    {% do spark_contracts_build(run, target_relation, existing_relation, spark_contracts_create_sql(target_relation, 'sql', run.fits or compiled_code), 'sql') %}
    {% do store_result('main', response=adapter.full_refresh_response(run, load_result('main').response)) %}
  {%- else -%}
    {#-- the planned load is typed and rendered by the adapter (core/materialization/load.py); a table model's
         rebuild (and a run that creates the table) is the CTAS over the run's source, as its creation was
         (beside the table, when it is swapped in after the load) --#}
    {%- set rebuilt = adapter.swap_beside(target_relation) if run.swaps_after_load else target_relation -%}
    {%- set rebuild_sql = spark_contracts_ctas(rebuilt, 'select * from ' ~ run.source, spark_contracts_table_constraints('sql'), assert_columns=false) if run.rebuilds else none -%}
    {% do store_result('main', response=adapter.execute_model_run(run, existing_relation, rebuild_sql)) %}
  {%- endif -%}
{% endmacro %}

{#-- A build that replaces `existing_relation` (`build`: the plan's PlannedBuild or ModelRun): in
     one statement where the format can; else built beside it and swapped in by two renames
     under the model's lease, so a failed or killed build leaves the old relation
     (core/recovery/swap.py; never Iceberg's NOT NULL build, which replaces in one statement); else (a
     view replaced at a location_root or path option) dropped first, as dbt-spark does; a table
     at a fixed path is refused before this (core/materialization/run_plan.replacement). --#}
{% macro spark_contracts_build(build, target_relation, existing_relation, sql, language='sql') %}
  {%- if build.swaps -%}
    {%- set create_sql = spark_contracts_ctas(adapter.swap_beside(target_relation), sql, spark_contracts_table_constraints(language)) -%}
    {% do write(create_sql) %}
    {% do store_result('main', response=adapter.swap_build(existing_relation, create_sql, model['unique_id'], invocation_id)) %}
  {%- else -%}
    {%- if build.drop_first -%}
      {% do adapter.drop_relation(existing_relation) %}
    {%- endif -%}
    {% do spark_contracts_create_main(target_relation, sql, language) %}
  {%- endif -%}
{% endmacro %}

{#-- A build that creates the table (`plan`: create, replace, build beside and swap, drop then
     create). Under a pydantic_contract whose rules can discard, the adapter plans it as a run
     (adapter.plan_create_run) carried out like any other: its discards counted and, with
     `quarantine: true`, quarantined. Else the table is created from spark_contracts_create_sql. --#}
{% macro spark_contracts_create(plan, target_relation, existing_relation, sql, language='sql') %}
  {%- set run = adapter.plan_create_run(plan, target_relation, sql, model, spark_contracts_run_vars(), invocation_id) if language == 'sql' and config.get('pydantic_contract') else none -%}
  {%- if run is not none -%}
    {{ spark_contracts_evolve_and_load(run, target_relation, existing_relation, sql) }}
  {%- else -%}
    {% do spark_contracts_build(plan, target_relation, existing_relation, spark_contracts_create_sql(target_relation, language, sql), language) %}
  {%- endif -%}
{% endmacro %}

{#-- `tables` of a schema contract, when the relation does not exist yet: true = create it.
     `sql`: the model's query when it is not the context's (a Python model's view). --#}
{% macro spark_contracts_may_create(relation, sql=none) %}
  {%- set compiled_code = sql if sql is not none else compiled_code -%}
  {%- set action = adapter.contract_new_table_action(relation, compiled_code, model, spark_contracts_run_vars()) -%}
  {%- if action == 'skip' -%}
    {% do store_result('main', response=adapter.skipped_response(model)) %}
  {%- endif -%}
  {{ return(action == 'create') }}
{% endmacro %}

{#-- What a run that creates the table writes: the model's query, or under a pydantic_contract
     that query coerced and checked against the declared class (adapter.contract_create_sql).
     `sql`: the model's query when it is not the context's (a Python model's view). --#}
{% macro spark_contracts_create_sql(relation, language, sql=none) %}
  {%- set compiled_code = sql if sql is not none else compiled_code -%}
  {%- if language == 'sql' and config.get('pydantic_contract') -%}
    {{ return(adapter.contract_create_sql(relation, compiled_code, model, spark_contracts_run_vars())) }}
  {%- endif -%}
  {{ return(compiled_code) }}
{% endmacro %}

{#-- A Python model runs here, in the dbt process, on the thread's SparkSession; its DataFrame
     becomes a temporary view and the materialization goes on with `select * from <view>`. --#}
{% macro spark_contracts_model_sql(language, compiled_code) %}
  {%- if language == 'python' -%}
    {{ return('select * from ' ~ adapter.python_model_view(compiled_code, model)) }}
  {%- endif -%}
  {{ return(compiled_code) }}
{% endmacro %}
