"""streamkit's web console: topics, messages, consumer groups, Connect and stream apps in a
browser, served by FastAPI on uvicorn as server-rendered pages (Jinja2) with small vendored
scripts (htmx, Chart.js) under ``static/vendor``: nothing to build, no network at run time.

It reaches the broker only over the Kafka protocol (aiokafka's admin client and consumer),
Connect only through its REST API and stream workers only through their web endpoints, so it
works against Apache Kafka and Kafka Connect too. Every page answers JSON as well
(``Accept: application/json``) with the data it shows.
"""

from streamkit.console.server import ConsoleServer, parse_listener
from streamkit.console.settings import ConsoleSettings
from streamkit.console.web import create_app

__all__ = ["ConsoleServer", "ConsoleSettings", "create_app", "parse_listener"]
