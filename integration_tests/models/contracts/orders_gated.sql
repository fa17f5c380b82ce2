-- the model's own dbt tests gate its load (orders_gated.yml): a row that fails one is dropped
-- and kept in orders_gated__quarantine, `_contract_reason` naming the test
{{ config(schema_contract={'data_tests': 'discard_row', 'quarantine': true}) }}
-- relationships reads `customers` when this model loads: built before it
-- depends_on: {{ ref('customers') }}
select order_id,
{% if var('contracts_v2', false) %}
  case when order_id = 104 then 9 else customer_id end as customer_id,
  case when order_id = 103 then 'lost' else status end as status
{% else %}
  customer_id, status
{% endif %}
from {{ ref('orders') }}
{% if is_incremental() %} where order_id >= 103 {% endif %}
