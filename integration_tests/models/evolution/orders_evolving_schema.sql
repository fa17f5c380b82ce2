-- Act 2 of `make demo`: v2 adds a column, a struct field, widens an int and adds a column with a
-- default that existing rows get by backfill. Delta: the plan runs as steps under a recorded intent.
{{ config(materialized='incremental', file_format='delta', unique_key='order_id',
          schema_evolution=({'columns': {'priority': {'default': "'normal'", 'backfill': "'normal'"}}}
                            if var('act', 1) >= 2 else {})) }}
select order_id,
{% if var('act', 1) >= 2 %}
  cast(order_id - 99 as bigint) as quantity,
  named_struct('city', 'Lyon', 'zip', '69001') as ship_to,
  'web' as channel,
  'normal' as priority
{% else %}
  cast(order_id - 99 as int) as quantity,
  named_struct('city', 'Lyon') as ship_to
{% endif %}
from {{ ref('orders') }}
{% if is_incremental() %} where order_id >= 103 {% endif %}
