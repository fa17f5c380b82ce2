{{ config(materialized='incremental', incremental_strategy='append') }}
select order_id, amount from {{ ref('orders') }}
{% if is_incremental() %} where order_id > (select max(order_id) from {{ this }}) {% endif %}
