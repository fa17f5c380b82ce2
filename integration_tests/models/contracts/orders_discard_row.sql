-- rows with a new column's value or a bad amount are dropped, and kept in orders_discard_row__quarantine
{{ config(schema_contract={'columns': 'discard_row', 'data_type': 'discard_row', 'quarantine': true}) }}
select order_id, customer_id,
{% if var('contracts_v2', false) %}
  case when order_id = 104 then 'n/a' else cast(amount as string) end as amount,
  case when order_id = 103 then 'priority' end as note
{% else %}
  cast(amount as decimal(10,2)) as amount
{% endif %}
from {{ ref('orders') }}
{% if is_incremental() %} where order_id >= 103 {% endif %}
