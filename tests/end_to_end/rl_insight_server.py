"""rl-insight's own server (its HTTP API: service discovery and scrape-target registration), on
127.0.0.1 only, for tests/end_to_end/test_rl_insight_live.py. `rl-insight server start` would
also start (and first download) its Prometheus, Tempo and Grafana; the test brings its own Prometheus.

    python rl_insight_server.py CONFIG_YAML PORT
"""

import sys

import uvicorn
from rl_insight.server.http_api import create_app
from rl_insight.utils.monitor_config_loader import load_server_config_file

if __name__ == "__main__":
    uvicorn.run(create_app(load_server_config_file(sys.argv[1])), host="127.0.0.1", port=int(sys.argv[2]),
                log_level="warning")
