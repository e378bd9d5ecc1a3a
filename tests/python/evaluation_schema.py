"""Validates JSON documents against a JSON Schema with Python's jsonschema, the reference
implementation (from PyPI, in the environment scripts/python_env.sh creates).

    python evaluation_schema.py SCHEMA DOCUMENT...

Prints one JSON object: the validator class the schema's "$schema" selects, and for each
document the list of its violations ("message at /json/pointer"), empty when it validates.
Exits 1 when any document has a violation, 0 otherwise.
"""

import json
import sys

from jsonschema import validators


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def violations(validator, document):
    found = []
    for error in validator.iter_errors(document):
        pointer = "/" + "/".join(str(p) for p in error.absolute_path)
        found.append(f"{error.message} at {pointer}")
    return sorted(found)


def main(schema_path, documents):
    schema = load(schema_path)
    kind = validators.validator_for(schema)
    kind.check_schema(schema)
    validator = kind(schema)
    report = {path: violations(validator, load(path)) for path in documents}
    json.dump({"validator": kind.__name__, "documents": report}, sys.stdout, indent=1)
    print()
    return 1 if any(report.values()) else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
