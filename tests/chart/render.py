#!/usr/bin/env python3
"""Renders or lints a Helm chart with Helm's own engine, for tests/chart.rs when no `helm` binary
is on the PATH: the helm-python-sdk package (PyPI) binds Helm's Go SDK (v4) through a C library.

  render.py template CHART_DIR --name NAME --namespace NS [--set K=V]...   # `helm template --include-crds`
  render.py lint CHART_DIR [--set K=V]...                                  # like `helm lint --strict`

Exits 3, saying why, when helm-python-sdk cannot be imported (the test then skips).
"""
import argparse
import json
import sys

try:
    import helm_python as helm
except Exception as e:  # ImportError, or the native library failing to load
    print(f"helm-python-sdk is not usable here: {e}", file=sys.stderr)
    sys.exit(3)


def values(sets):
    merged = {}
    for expression in sets or []:
        merge(merged, helm.parse_set_string(expression))
    return merged


def merge(into, new):
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=["template", "lint"])
    parser.add_argument("chart")
    parser.add_argument("--name", default="promoter")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--set", action="append")
    args = parser.parse_args()
    try:
        if args.action == "lint":
            result = helm.lint(args.chart, values(args.set), strict=True, namespace=args.namespace)
            print(json.dumps(result, indent=2))
            return 1 if result.get("errors") else 0
        with helm.Chart.load(args.chart) as chart:
            rendered = chart.render(
                values(args.set), name=args.name, namespace=args.namespace, is_install=True
            )
            crds = chart.crds
    except helm.HelmError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    # crds/ first, as Helm installs them, unrendered.
    for crd in crds:
        print(f"---\n# Source: {crd['filename']}\n{crd['data']}")
    for source in sorted(rendered):
        text = rendered[source]
        if source.endswith("NOTES.txt") or not text.strip():
            continue
        print(f"---\n# Source: {source}\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
