"""Great Expectations suites built from the public schema."""
