"""Great Expectations suites built from the public schema, and the validation of DuckDB tables.

Importing this package switches Great Expectations' usage analytics off (``GX_ANALYTICS_ENABLED=false``)
before ``great_expectations`` is imported by a submodule: validation must never send anything anywhere.
"""

import os

os.environ["GX_ANALYTICS_ENABLED"] = "false"
