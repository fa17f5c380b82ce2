{{ config(materialized='table') }}
select
  c.customer_id,
  c.name,
  named_struct('country', c.country, 'signed_up_at', c.signed_up_at) as profile,
  collect_list(named_struct('order_id', o.order_id, 'amount', cast(o.amount as decimal(10,2)))) as orders,
  cast(sum(o.amount) as decimal(12,2)) as lifetime_value
from {{ ref('customers') }} c
left join {{ ref('orders') }} o on o.customer_id = c.customer_id
group by c.customer_id, c.name, c.country, c.signed_up_at
