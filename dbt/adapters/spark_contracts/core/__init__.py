"""The pure core: no Spark and no dbt (tests/unit/test_architecture.py checks it). Its folders
name what decides what: `schema/`, `evolution/`, `contracts/`, `materialization/`, `recovery/`,
`report/`, `settings/`; import from the module that defines a name."""
