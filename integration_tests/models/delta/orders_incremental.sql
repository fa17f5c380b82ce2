{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_id') }}
select order_id, customer_id, cast(amount as decimal(10,2)) as amount, status, ordered_at
from {{ ref('orders') }}
{% if is_incremental() %}
where ordered_at >= (select max(ordered_at) from {{ this }})
{% endif %}
