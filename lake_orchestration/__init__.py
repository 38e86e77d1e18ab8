"""lakepool's Dagster adapter: pools as assets, sensors, schedules (grows in the orchestration
issue). A thin layer over :mod:`lake_core`; it holds no lake logic of its own."""
