{{ config(materialized='table') }}
select country, count(*) as customers from {{ ref('customers') }} group by country
