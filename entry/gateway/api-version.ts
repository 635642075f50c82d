// The version of the gateway's HTTP API (paths under /v1): the OpenAPI document's info.version and
// the version of the Python client (clients/python/rods_client/__init__.py `__version__`, read by
// its pyproject.toml). clients/python/version.unit.test.ts checks that the two agree. The major
// is the path prefix; bump the minor for an added field or operation, the patch for a fix.
export const API_VERSION = '1.1.0';
