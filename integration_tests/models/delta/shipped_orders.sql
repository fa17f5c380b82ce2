{{ config(materialized='view') }}
select * from {{ ref('orders_incremental') }} where status = 'shipped'
