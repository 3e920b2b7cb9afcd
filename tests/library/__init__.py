"""Tests of the library as shipped: the API, the command line, devices, imports, packaging, the module,
the catalog, the environments and the suite's own rules."""
