"""Orders enriched with their customer: a stream-table join.

Inputs, both keyed by customer id:

* ``customers``: JSON ``{"id", "name", "tier"}``, the latest record per id is the customer
  (a record with a null value deletes it). Materialized as the table ``customers``.
* ``orders``: JSON ``{"order_id", "customer_id", "amount"}``.

Every order is joined with the customer as the table holds it when the order is processed
(a left join: an order of an unknown customer still goes out, with ``customer: null``) and
written to ``enriched_orders``: ``{"order": {...}, "customer": {...} | null}``, keyed by
customer id. A customer update affects later orders only; orders are not re-emitted.

Both topics must be keyed by customer id with the same number of partitions (the worker
refuses to start otherwise): partition *p* of ``orders`` is joined against partition *p*
of the table.

Run it::

    streamkit worker -A apps.orders --web-port 8080                # embedded broker
    streamkit worker -A apps.orders --broker 127.0.0.1:9092
    curl localhost:8080/tables/customers/c-1                      # the customer, as JSON
"""

from __future__ import annotations

from pydantic import BaseModel

import streamkit


class Customer(BaseModel):
    id: str
    name: str
    tier: str = "standard"


class Order(BaseModel):
    order_id: str
    customer_id: str
    amount: float


class EnrichedOrder(BaseModel):
    order: Order
    customer: Customer | None


app = streamkit.App("orders")
customers = app.topic("customers", value_type=Customer)
orders = app.topic("orders", value_type=Order)

customer_table = app.stream(customers).to_table("customers", value_type=Customer)

(app.stream(orders)
    .join(customer_table, how="left",
          joiner=lambda order, customer: EnrichedOrder(order=order, customer=customer))
    .to("enriched_orders", value_type=EnrichedOrder))
