{{ config(materialized='incremental', incremental_strategy='merge', unique_key='order_id') }}
select order_id, status, ordered_at from {{ ref('orders') }}
