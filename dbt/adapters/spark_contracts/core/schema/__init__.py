"""Typed Spark schemas: the type model, its parsers (DDL, catalog strings, schema JSON), the diff
of a deployed schema against a compiled one, the one struct merge and the one cast renderer."""
