-- every order amount is counted once in some customer's lifetime value
select 1
from (select sum(lifetime_value) as ltv from {{ ref('customer_orders') }}) a
cross join (select sum(amount) as total from {{ ref('orders_incremental') }}) b
where a.ltv <> b.total
