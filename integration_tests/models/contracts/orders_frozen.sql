-- inherits the folder's contract: v2 adds a column and a non-numeric amount, and fails
select order_id, customer_id,
{% if var('contracts_v2', false) %}
  case when order_id = 104 then 'n/a' else cast(amount as string) end as amount, status
{% else %}
  cast(amount as decimal(10,2)) as amount
{% endif %}
from {{ ref('orders') }}
{% if is_incremental() %} where order_id >= 103 {% endif %}
