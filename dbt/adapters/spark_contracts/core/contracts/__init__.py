"""Data contracts: the schema contract (dlt's modes) and what it decides for a run, declared
(Pydantic) contracts and their value checks, dbt's enforced contract and constraints, the
contract's one load SELECT with its checked casts, the quarantine table."""
