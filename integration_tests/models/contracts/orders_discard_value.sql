-- the new column is left out of the load and a bad amount loads as NULL
{{ config(schema_contract={'columns': 'discard_value', 'data_type': 'discard_value'}) }}
select order_id, customer_id,
{% if var('contracts_v2', false) %}
  case when order_id = 104 then 'n/a' else cast(amount as string) end as amount, status
{% else %}
  cast(amount as decimal(10,2)) as amount
{% endif %}
from {{ ref('orders') }}
{% if is_incremental() %} where order_id >= 103 {% endif %}
