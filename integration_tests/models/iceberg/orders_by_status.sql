{{ config(materialized='table') }}
select status, count(*) as orders, cast(sum(amount) as decimal(12,2)) as amount
from {{ ref('orders') }}
group by status
